#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "model_run.h"
#include "qtft/common/error.h"
#include "qtft/eval/conformal_evaluation.h"
#include "qtft/eval/evaluate.h"
#include "qtft/infer/forecast.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {

void add_predict_command(CLI::App& app) {
  struct Flags {
    ModelRunFlags run;
    std::string output, metrics_json, conformal;
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
  cmd->add_option("--conformal", flags->conformal,
                  "Write the quantiles with the model file's conformal offsets of this method (split or adaptive), "
                  "and report their coverage beside the raw quantiles'")
      ->check(CLI::IsMember({"split", "adaptive"}));
  cmd->callback([flags] {
    if (!flags->output.ends_with(".csv") && !flags->output.ends_with(".parquet")) {
      throw UsageError("--output " + flags->output + ": use a .csv or .parquet file name");
    }
    auto run = open_model_run(flags->run);
    const auto& options = run.loaded.model->options();
    const artifact::ConformalCalibration* conformal =
        flags->conformal.empty()
            ? nullptr
            : &artifact::require_conformal(run.loaded.file, flags->conformal, flags->run.load_model);
    // The rows and the figures of the same forecasts, in one pass.
    infer::ForecastTableBuilder rows(run.dataset, options.quantiles(), options.median_index());
    eval::SplitForecasts raw, moved;
    const auto evaluation = eval::evaluate_for_desk(
        run.loaded.model, run.dataset, run.split, flags->run.batch_size, run.device, flags->cost_bps,
        [&](const data::Batch& batch, const model::TftOutput& out) {
          if (!conformal) return rows.add(batch, out);
          model::TftOutput offset = out;
          offset.quantiles = eval::with_conformal_offsets(*conformal, run.dataset, batch, out.quantiles);
          raw.add(batch, out);
          moved.add(batch, offset);
          rows.add(batch, offset);
        });
    const auto table = rows.take();
    data::write_forecast_table(table, flags->output);
    std::cout << "Wrote " << flags->output << ": " << table.rows() << " rows (" << run.dataset.num_windows(run.split)
              << " " << data::split_name(run.split) << " windows x " << run.dataset.options().horizon << " steps)\n"
              << "as a desk reads them (target units; the median forecast):\n"
              << eval::format_desk_metrics(evaluation.desk, "  ");
    std::optional<nlohmann::json> coverage;
    if (conformal) {
      const auto a = eval::coverage_of(raw, options.quantiles()), b = eval::coverage_of(moved, options.quantiles());
      std::printf(
          "The rows carry %s conformal offsets: interval coverage %.3f (raw %.3f, nominal %.3f), loss %.5f "
          "(raw %.5f, scaled units)\n",
          conformal->method.c_str(), b.interval, a.interval, options.quantiles().back() - options.quantiles().front(),
          b.loss, a.loss);
      coverage = {
          {"method", conformal->method}, {"raw", eval::to_json(a, false)}, {"conformal", eval::to_json(b, false)}};
    }
    if (!flags->metrics_json.empty()) {
      nlohmann::json j{{"split", data::split_name(run.split)},
                       {"windows", run.dataset.num_windows(run.split)},
                       {"model", eval::to_json(evaluation.metrics)},
                       {"desk", eval::to_json(evaluation.desk, run.dataset.schema().symbols)}};
      if (coverage) j["conformal"] = *coverage;
      io::write_file_atomically(flags->metrics_json, j.dump(2) + "\n");
    }
  });
}

}  // namespace qtft::cli
