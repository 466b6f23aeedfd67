#pragma once

// `qtft train`'s console: the configuration and the workflow's events, printed as the run goes.

#include <c10/core/Device.h>

#include <cstdint>
#include <cstdio>
#include <iostream>

#include "data_flags.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/features/dataset_summary.h"
#include "qtft/model/model_building.h"
#include "qtft/model/tft_options.h"
#include "qtft/quant/observers.h"
#include "qtft/train/run_training.h"
#include "qtft/train/train_options.h"
#include "qtft/train/workflow.h"

namespace qtft::cli {

void print_config(const model::TftOptions& m, const train::TrainOptions& t, int64_t parameters, c10::Device device);
// On stderr: where the interrupted run's checkpoint is and how to continue it.
void print_interrupted(const train::TrainingOutcome& outcome);
// The summary line of a finished run: its best epoch against the naive baselines.
void print_summary(const train::TrainingOutcome& outcome);

// The workflow's events, printed as the run goes.
class ConsolePrinter : public train::TrainingEvents {
 public:
  ConsolePrinter(const data::BarSource& source, bool verbose_observers, c10::Device device)
      : source_(source), verbose_(verbose_observers), device_(device) {}
  void data_parallel_started(int64_t ranks, const char* backend, int threads, size_t batch_size,
                             quant::ObserverUpdate observers) override {
    std::printf(
        "Data parallel: %lld ranks (%s), %d thread%s each; every step takes %zu windows per rank, %zu in "
        "all; live QAT observers update %s\n",
        static_cast<long long>(ranks), backend, threads, threads == 1 ? "" : "s", batch_size,
        batch_size * static_cast<size_t>(ranks),
        observers == quant::ObserverUpdate::Step ? "once per step (one collective)" : "in every forward");
  }
  void embedded_data_used(const data::BarSource& source) override {
    std::cout << "No --parquet-file or --csv-file given: training on the " << data::describe_source(source) << "\n";
  }
  void model_loaded(const std::filesystem::path& path) override {
    std::cout << "Loaded " << path.string() << " (its configuration, features and windows are kept)\n";
  }
  void feature_store_ready(const data::StorePreparation& store) override { print_store(store); }
  void data_ready(const data::Dataset& dataset) override {
    std::cout << "Data: " << data::describe_source(source_) << "\n" << data::summarize_dataset(dataset);
  }
  void model_ready(const model::TemporalFusionTransformer& model, const train::TrainOptions& train) override {
    print_config(model->options(), train, model::count_parameters(*model.ptr()), device_);
  }
  void calibration_started(int64_t batches) override {
    std::printf("Starting QAT calibration (%lld batches)...\n", static_cast<long long>(batches));
    std::fflush(stdout);
  }
  void calibration_finished(const model::TemporalFusionTransformer& model,
                            const data::RegimeCoverage& coverage) override {
    std::printf("Calibration complete\nObserver statistics:\n%s%s",
                quant::format_observer_table(quant::observer_stats(*model.ptr()), verbose_ ? 0 : 12).c_str(),
                data::format_regime_coverage(coverage).c_str());
  }
  void observers_frozen(size_t observers) override {
    std::printf("QAT observers frozen (%zu observers; scales and zero points fixed)\n", observers);
  }
  void baselines_ready(const eval::BaselineMetrics& b) override {
    std::printf("Baselines on validation: zero-return loss %.5f, training quantiles loss %.5f (best: %s)\n",
                b.zero.loss, b.empirical.loss, b.best_name().c_str());
  }
  void two_phase_planned(const train::TwoPhasePlan& plan) override { std::printf("%s\n", plan.describe().c_str()); }
  void qat_phase_started(const train::TwoPhasePlan& plan, int64_t fp32_best_epoch) override {
    std::printf(
        "FP32 phase done (best epoch %lld); QAT phase: those weights fake-quantized at %lld-bit weights, "
        "%lld-bit activations, learning rate %g\n",
        static_cast<long long>(fp32_best_epoch), static_cast<long long>(plan.weight_bits),
        static_cast<long long>(plan.activation_bits), plan.learning_rate);
    std::fflush(stdout);
  }
  void update_planned(const train::UpdateOrigin& update) override {
    std::printf("Update of %s: new bars after those it trained on\n", update.parent.c_str());
    for (const auto& a : update.added) {
      std::printf("  %s: %s to %s\n", a.symbol.c_str(), format_utc(a.first_bar_ns).c_str(),
                  format_utc(a.last_bar_ns).c_str());
    }
  }
  void resumed(const artifact::TrainingState& st) override {
    std::printf("Resuming after epoch %lld, batch %lld (step %lld)\n", static_cast<long long>(st.epochs_completed),
                static_cast<long long>(st.batches_done_in_epoch), static_cast<long long>(st.global_step));
  }

 private:
  const data::BarSource& source_;
  bool verbose_;
  c10::Device device_;
};

}  // namespace qtft::cli
