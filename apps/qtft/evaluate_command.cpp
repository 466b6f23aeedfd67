#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "commands.h"
#include "model_run.h"
#include "qtft/common/format.h"
#include "qtft/eval/baselines.h"
#include "qtft/eval/conformal_evaluation.h"
#include "qtft/eval/evaluate.h"
#include "qtft/eval/split_tensors.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {
namespace {

void print_row(const char* name, const eval::ForecastMetrics& m) {
  std::printf("  %-22s %9.5f %9.5f %9.5f %8.4f %8.4f\n", name, m.loss, m.rmse, m.mae, m.p50, m.p90);
}

void print_units_row(const char* name, const eval::TargetUnitFigures& m) {
  std::printf("  %-22s %9.3g %9.3g %9.3g %8.4f %8.4f\n", name, m.loss, m.rmse, m.mae, m.p50, m.p90);
}

}  // namespace

void add_evaluate_command(CLI::App& app) {
  struct Flags {
    ModelRunFlags run;
    std::string metrics_json, save_inputs, conformal;
    double cost_bps = 0.0;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("evaluate", "Metrics of a saved model and the naive baselines on bars");
  add_model_run_flags(*cmd, flags->run);
  cmd->add_option("--metrics-json", flags->metrics_json, "Write the metrics as JSON")->check(writable_file());
  cmd->add_option("--cost-bps", flags->cost_bps,
                  "Trading cost of the desk metrics' position, in basis points per unit of position traded")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--conformal", flags->conformal,
                  "Also measure the quantiles with conformal offsets: split (fitted on the validation split, per step "
                  "and level), beside the raw ones")
      ->check(CLI::IsMember({"split"}));
  cmd->add_option("--save-inputs", flags->save_inputs,
                  "Also write every window of the split as the model took it and answered (its inputs as the ONNX "
                  "graph's, target.npy, quantiles.npy) to this folder");
  cmd->callback([flags] {
    // The folder first: a path that cannot be one fails before any work.
    if (!flags->save_inputs.empty()) std::filesystem::create_directories(flags->save_inputs);
    auto run = open_model_run(flags->run);
    if (!flags->conformal.empty()) eval::check_conformal_splits(data::Split::Validation, run.split);  // before the work
    // What the flags ask for beyond the metrics, gathered in the evaluation's one pass.
    eval::SplitTensors recorded;
    eval::SplitForecasts measured;
    std::function<void(const data::Batch&, const model::TftOutput&)> record;
    if (!flags->save_inputs.empty() || !flags->conformal.empty()) {
      record = [&](const data::Batch& batch, const model::TftOutput& out) {
        if (!flags->save_inputs.empty()) recorded.add(batch, out);
        if (!flags->conformal.empty()) measured.add(batch, out);
      };
    }
    const auto evaluation = eval::evaluate_for_desk(run.loaded.model, run.dataset, run.split, flags->run.batch_size,
                                                    run.device, flags->cost_bps, record);
    const auto& metrics = evaluation.metrics;
    auto baselines = eval::evaluate_baselines(run.dataset, run.split, run.loaded.model->options().quantiles());
    std::printf("%s split: %lld windows (metrics in units of the training return std)\n", data::split_name(run.split),
                static_cast<long long>(run.dataset.num_windows(run.split)));
    std::printf("  %-22s %9s %9s %9s %8s %8s\n", "forecast", "loss", "rmse", "mae", "P50", "P90");
    print_row("model", metrics);
    print_row("zero return", baselines.zero);
    print_row("training quantiles", baselines.empirical);
    if (std::isfinite(metrics.in_target_units.loss)) {
      std::printf("in the target's units (before scaling; per series under --normalize per-series):\n");
      print_units_row("model", metrics.in_target_units);
      print_units_row("zero return", baselines.zero.in_target_units);
      print_units_row("training quantiles", baselines.empirical.in_target_units);
    }
    std::printf("as a desk reads it (target units; the median forecast):\n%s",
                eval::format_desk_metrics(evaluation.desk, "  ").c_str());
    std::optional<eval::ConformalEvaluation> conformal;
    if (!flags->conformal.empty()) {
      conformal = eval::evaluate_split_conformal(run.loaded.model, run.dataset, data::Split::Validation, run.split,
                                                 measured, flags->run.batch_size, run.device);
      std::printf("conformal quantiles (split: offsets per step and level from the validation split's %lld windows):\n",
                  static_cast<long long>(conformal->calibration_windows));
      const auto& levels = conformal->offsets.levels;
      std::printf("  %-10s", "coverage");
      for (double q : levels) std::printf(" %9s", ("q" + format_number(q)).c_str());
      std::printf(" %9s %9s\n", "interval", "loss");
      std::printf("  %-10s", "nominal");
      for (double q : levels) std::printf(" %9.3f", q);
      std::printf(" %9.3f\n", conformal->nominal_interval);
      for (const auto& [name, c] : {std::pair{"raw", conformal->raw}, std::pair{"conformal", conformal->conformal}}) {
        std::printf("  %-10s", name);
        for (double share : c.below) std::printf(" %9.3f", share);
        std::printf(" %9.3f %9.5f\n", c.interval, c.loss);
      }
    }
    if (!flags->save_inputs.empty()) {
      recorded.save(flags->save_inputs);
      std::fprintf(stderr, "Wrote the %s split's inputs, target and quantiles to %s\n", data::split_name(run.split),
                   flags->save_inputs.c_str());
    }
    if (!flags->metrics_json.empty()) {
      // Keys named after the split, as training names its own: val_loss, test_loss, train_loss.
      const std::string prefix = run.split == data::Split::Validation ? "val" : data::split_name(run.split);
      nlohmann::json j{{"split", data::split_name(run.split)},
                       {"windows", run.dataset.num_windows(run.split)},
                       {prefix + "_loss", metrics.loss},
                       {prefix + "_rmse", metrics.rmse},
                       {prefix + "_mae", metrics.mae},
                       {"model", eval::to_json(metrics)},
                       {"baseline_" + prefix + "_loss", baselines.best().loss},
                       {"baselines", eval::to_json(baselines)},
                       {"desk", eval::to_json(evaluation.desk, run.dataset.schema().symbols)},
                       {"unknown_category_rows", run.dataset.notes().unknown_category_rows}};
      if (conformal) j["conformal"] = eval::to_json(*conformal);
      io::write_file_atomically(flags->metrics_json, j.dump(2) + "\n");
    }
  });
}

}  // namespace qtft::cli
