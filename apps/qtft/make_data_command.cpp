#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "commands.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/bars/synthetic.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {

void add_make_data_command(CLI::App& app) {
  struct Flags {
    std::string output;
    data::SyntheticOptions synthetic;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("make-data", "Write the embedded synthetic futures bars to a file");
  cmd->add_option("--output", flags->output,
                  "Output file (.parquet, or .csv), or a folder (ending in /) for a Hive-partitioned dataset: "
                  "FOLDER/symbol=S/year=Y/part-0.parquet")
      ->required();
  cmd->add_option("--rows", flags->synthetic.rows, "Bars in all, shared evenly by the symbols")->capture_default_str();
  cmd->add_option("--symbols", flags->synthetic.symbols, "Number of symbols")->capture_default_str();
  cmd->add_option("--seed", flags->synthetic.seed, "Random seed")->capture_default_str();
  cmd->add_option("--bar-minutes", flags->synthetic.bar_minutes, "Minutes per bar (1..60)")->capture_default_str();
  cmd->add_option("--shift-after-bar", flags->synthetic.shift_after_bar,
                  "A regime change from this bar of each series on (0: none): the bars before it are unchanged")
      ->capture_default_str();
  cmd->add_option("--shift-volatility", flags->synthetic.shift_volatility,
                  "With --shift-after-bar: volatility multiplied by this")
      ->capture_default_str();
  cmd->add_option("--shift-drift", flags->synthetic.shift_drift,
                  "With --shift-after-bar: a drift per bar, in units of the bar's volatility")
      ->capture_default_str();
  cmd->add_option("--extra-inputs", flags->synthetic.extra_inputs,
                  "Extra columns to try declared inputs on: lead_signal (leads the next return), event_flag "
                  "(a known schedule of volatile releases), vol_class (a static category per symbol), then f00, "
                  "f01, ... (noise); see docs/DATA.md")
      ->capture_default_str();
  cmd->callback([flags] {
    const auto& out = flags->output;
    if (out.ends_with("/") || data::is_directory(out)) {
      // One symbol at a time: a dataset of hundreds of millions of bars never sits in memory.
      size_t files = 0;
      int64_t rows = 0;
      for (int k = 0; k < flags->synthetic.symbols; ++k) {
        const auto bars = data::generate_synthetic_symbol(flags->synthetic, k);
        files += data::write_parquet_partitions(bars, out);
        rows += static_cast<int64_t>(bars.total_rows());
      }
      std::cout << "Wrote " << out << ": " << rows << " bars, " << flags->synthetic.symbols << " symbols in " << files
                << " files partitioned by symbol and year (seed " << flags->synthetic.seed << ")\n";
      return;
    }
    io::check_writable(out, "--output");
    auto bars = data::generate_synthetic_bars(flags->synthetic);
    if (out.ends_with(".csv")) {
      data::write_bars_csv(bars, out);
    } else if (out.ends_with(".parquet")) {
      data::write_bars_parquet(bars, out);
    } else {
      throw UsageError("--output " + out + ": use a .parquet or .csv file name");
    }
    std::cout << "Wrote " << out << ": " << bars.total_rows() << " bars, " << bars.series.size() << " symbols (seed "
              << flags->synthetic.seed << ")\n";
  });
}

}  // namespace qtft::cli
