#include <arrow/table.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "commands.h"
#include "data_flags.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/arrow_bars.h"
#include "run_flags.h"

namespace qtft::cli {

void add_convert_command(CLI::App& app) {
  struct Flags {
    std::string input, output;
    bool no_validate = false;
    DataFlags data;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("convert", "Convert a CSV file of bars to Parquet");
  cmd->add_option("input", flags->input, "CSV file")->required()->check(CLI::ExistingFile);
  cmd->add_option("output", flags->output, "Parquet file to write")->required()->check(writable_file());
  cmd->add_flag("--no-validate", flags->no_validate,
                "Convert any CSV table as it is, without checking it holds valid bars");
  auto& c = flags->data.source.read.columns;
  cmd->add_option("--timestamp-column", c.timestamp, "Timestamp column (for validation)")->capture_default_str();
  cmd->add_option("--close-column", c.close, "Close price column (for validation)")->capture_default_str();
  cmd->add_option("--symbol-column", c.symbol, "Symbol column (for validation)")->capture_default_str();
  cmd->callback([flags] {
    if (!flags->output.ends_with(".parquet")) {
      throw UsageError("output " + flags->output + ": use a .parquet file name");
    }
    auto table = data::read_csv_table(flags->input);
    // Validating first means a converted file is one that training will accept.
    if (!flags->no_validate) data::bars_from_table(*table, flags->input, flags->data.source.read);
    data::write_parquet_table(*table, flags->output);
    std::cout << "Wrote " << flags->output << ": " << table->num_rows() << " rows, " << table->num_columns()
              << " columns\n";
  });
}

}  // namespace qtft::cli
