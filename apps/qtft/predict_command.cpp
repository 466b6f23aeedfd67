#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_run.h"
#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"
#include "qtft/infer/forecast.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {

void add_predict_command(CLI::App& app) {
  struct Flags {
    ModelRunFlags run;
    std::string output, metrics_json;
    double cost_bps = 0.0;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("predict", "Quantile forecasts of a saved model, in returns and prices");
  add_model_run_flags(*cmd, flags->run);
  cmd->add_option("--output", flags->output, "forecasts.csv or forecasts.parquet")->required()->check(writable_file());
  cmd->add_option("--metrics-json", flags->metrics_json, "Also write the forecasts' metrics and desk metrics as JSON")
      ->check(writable_file());
  cmd->add_option("--cost-bps", flags->cost_bps,
                  "Trading cost of the desk metrics' position, in basis points per unit of position traded")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->callback([flags] {
    if (!flags->output.ends_with(".csv") && !flags->output.ends_with(".parquet")) {
      throw UsageError("--output " + flags->output + ": use a .csv or .parquet file name");
    }
    auto run = open_model_run(flags->run);
    const auto& options = run.loaded.model->options();
    // The rows and the figures of the same forecasts, in one pass.
    infer::ForecastTableBuilder rows(run.dataset, options.quantiles(), options.median_index());
    const auto evaluation = eval::evaluate_for_desk(
        run.loaded.model, run.dataset, run.split, flags->run.batch_size, run.device, flags->cost_bps,
        [&](const data::Batch& batch, const model::TftOutput& out) { rows.add(batch, out); });
    const auto table = rows.take();
    data::write_forecast_table(table, flags->output);
    std::cout << "Wrote " << flags->output << ": " << table.rows() << " rows (" << run.dataset.num_windows(run.split)
              << " " << data::split_name(run.split) << " windows x " << run.dataset.options().horizon << " steps)\n"
              << "as a desk reads them (target units; the median forecast):\n"
              << eval::format_desk_metrics(evaluation.desk, "  ");
    if (!flags->metrics_json.empty()) {
      const nlohmann::json j{{"split", data::split_name(run.split)},
                             {"windows", run.dataset.num_windows(run.split)},
                             {"model", eval::to_json(evaluation.metrics)},
                             {"desk", eval::to_json(evaluation.desk, run.dataset.schema().symbols)}};
      io::write_file_atomically(flags->metrics_json, j.dump(2) + "\n");
    }
  });
}

}  // namespace qtft::cli
