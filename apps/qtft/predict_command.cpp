#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "commands.h"
#include "model_run.h"
#include "qtft/common/error.h"
#include "qtft/infer/forecast.h"
#include "run_flags.h"

namespace qtft::cli {

void add_predict_command(CLI::App& app) {
  struct Flags {
    ModelRunFlags run;
    std::string output;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("predict", "Quantile forecasts of a saved model, in returns and prices");
  add_model_run_flags(*cmd, flags->run);
  cmd->add_option("--output", flags->output, "forecasts.csv or forecasts.parquet")->required()->check(writable_file());
  cmd->callback([flags] {
    if (!flags->output.ends_with(".csv") && !flags->output.ends_with(".parquet")) {
      throw UsageError("--output " + flags->output + ": use a .csv or .parquet file name");
    }
    auto run = open_model_run(flags->run);
    auto table = infer::forecast_split(run.loaded.model, run.dataset, run.split, flags->run.batch_size, run.device);
    data::write_forecast_table(table, flags->output);
    std::cout << "Wrote " << flags->output << ": " << table.rows() << " rows (" << run.dataset.num_windows(run.split)
              << " " << data::split_name(run.split) << " windows x " << run.dataset.options().horizon << " steps)\n";
  });
}

}  // namespace qtft::cli
