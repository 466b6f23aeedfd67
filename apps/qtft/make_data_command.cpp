#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "commands.h"
#include "qtft/common/error.h"
#include "qtft/data/bars.h"
#include "qtft/data/synthetic.h"
#include "run_flags.h"

namespace qtft::cli {

void add_make_data_command(CLI::App& app) {
  struct Flags {
    std::string output;
    data::SyntheticOptions synthetic;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("make-data", "Write the embedded synthetic futures bars to a file");
  cmd->add_option("--output", flags->output, "Output file (.parquet, or .csv)")->required()->check(writable_file());
  cmd->add_option("--rows", flags->synthetic.rows, "Bars in all, shared evenly by the symbols")
      ->capture_default_str();
  cmd->add_option("--symbols", flags->synthetic.symbols, "Number of symbols")->capture_default_str();
  cmd->add_option("--seed", flags->synthetic.seed, "Random seed")->capture_default_str();
  cmd->callback([flags] {
    auto bars = data::generate_synthetic_bars(flags->synthetic);
    const auto& out = flags->output;
    if (out.ends_with(".csv")) {
      data::write_bars_csv(bars, out);
    } else if (out.ends_with(".parquet")) {
      data::write_bars_parquet(bars, out);
    } else {
      throw UsageError("--output " + out + ": use a .parquet or .csv file name");
    }
    std::cout << "Wrote " << out << ": " << bars.total_rows() << " bars, " << bars.series.size()
              << " symbols (seed " << flags->synthetic.seed << ")\n";
  });
}

}  // namespace qtft::cli
