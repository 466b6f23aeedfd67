// `qtft train --compare-accuracy`: FP32, PTQ and QAT with equal epoch budgets, side by side.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "data_flags.h"
#include "interrupt.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/io/atomic_file.h"
#include "qtft/model/model_building.h"
#include "qtft/train/compare_accuracy.h"
#include "qtft/train/progress.h"
#include "qtft/train/qat_recipe.h"
#include "train_flags.h"
#include "training_printer.h"

namespace qtft::cli {
namespace {

// The comparison's recipe in words, checked before any data loads (UsageError naming flags).
std::string comparison_budget(const TrainFlags& f) {
  auto recipe = static_cast<train::QatRecipe>(f.qat);
  recipe.two_phase = true;
  const auto plan = train::plan_two_phase(recipe, f.train, /*fp32_loaded=*/false);
  const auto epochs = std::to_string(f.train.epochs);
  if (!plan) return "every model trains " + epochs + " epochs (QAT from scratch)";
  return "every model has " + epochs + " epochs: QAT takes over the FP32 run after " +
         std::to_string(plan->fp32_epochs) + " and fine-tunes for " + std::to_string(plan->qat_epochs);
}

}  // namespace

void run_compare_accuracy(const TrainFlags& f) {
  comparison_budget(f);  // flags before data
  auto device = f.runtime.resolve_device();
  const auto& source = f.data.source;
  if (source.uses_embedded_data()) {
    std::cout << "No --parquet-file or --csv-file given: comparing on the " << data::describe_source(source) << "\n";
  }
  auto shared_dataset = std::make_shared<const data::Dataset>(
      data::open_dataset(source, f.data.dataset, nullptr, data::StoreAccess::BuildIfNeeded, print_store));
  const auto& dataset = *shared_dataset;
  // Every model of the comparison has this architecture; the QAT rows set their own bits.
  const auto options = model::model_options_for(dataset, f.model, false, f.qat.weight_bits, f.qat.activation_bits);
  train::CompareOptions compare{options, f.train, f.qat, device};
  compare.train.freeze_observers_after_epochs = 0;
  print_config(options, f.train, model::count_parameters(*model::TemporalFusionTransformer(options)), device);
  std::printf(
      "Comparing FP32, PTQ, QAT (two-phase, frozen) and QAT (live) at %lld-bit weights, %lld-bit activations; "
      "%s\n",
      static_cast<long long>(f.qat.weight_bits), static_cast<long long>(f.qat.activation_bits),
      comparison_budget(f).c_str());
  auto progress = train::make_console_progress(stdout, stdout_is_terminal());
  auto rows = train::compare_accuracy(
      shared_dataset, compare, *progress,
      [](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      },
      interrupt_requested);
  std::printf("\nAccuracy comparison (validation split, best epoch of each):\n%s",
              train::format_comparison(rows).c_str());
  if (!f.metrics_json.empty()) {
    nlohmann::json j{{"config",
                      {{"model", model::to_json(options)},
                       {"training", train::to_json(f.train)},
                       {"weight_bits", f.qat.weight_bits},
                       {"activation_bits", f.qat.activation_bits},
                       {"calibration_batches", f.qat.calibration_batches},
                       {"qat_live_epochs", f.qat.live_epochs},
                       {"data", data::describe_source(source)}}},
                     {"models", train::to_json(rows, shared_dataset->schema().symbols)}};
    io::write_file_atomically(f.metrics_json, j.dump(2) + "\n");
  }
}

}  // namespace qtft::cli
