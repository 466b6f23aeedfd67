#include "qtft/train/compare_accuracy.h"
#include "qtft/model/model_building.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "qtft/artifact/int8_file.h"
#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/eval/evaluate.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/trainer.h"
#include "qtft/train/workflow.h"

namespace qtft::train {
namespace {

// A file name in the system's temporary directory, removed (if written) on scope exit.
struct TemporaryFile {
  explicit TemporaryFile(const std::string& stem)
      : path(std::filesystem::temp_directory_path() /
             (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(next_id()) + ".safetensors")) {}
  ~TemporaryFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  static int next_id() {
    static std::atomic<int> id{0};
    return id++;
  }
  std::filesystem::path path;
};

// Trains to the end of its budget and leaves the model holding its best epoch's weights.
// A comparison of half-trained models would mislead, and there is no single run to resume:
// a stopped (or out of memory) training ends the comparison with nothing saved.
void require_finished(const train::TrainResult& result) {
  if (!result.out_of_memory.empty()) throw Error(result.out_of_memory + "; the accuracy comparison saved nothing");
  if (result.interrupted) {
    throw Error("interrupted: the accuracy comparison stopped before it finished; nothing was saved");
  }
}

eval::Evaluation finish_best(train::Trainer& trainer, const data::Dataset& dataset, const train::TrainOptions& options,
                             c10::Device device, train::ProgressReporter& progress,
                             const std::function<bool()>& stop_requested) {
  require_finished(trainer.fit(progress, stop_requested));
  auto& model = trainer.model();
  artifact::copy_weights_into(*model, trainer.best_weights(), "best weights");
  return eval::evaluate_for_desk(model, dataset, data::Split::Validation, options.eval_batch_size, device, 0.0);
}

eval::Evaluation train_best(model::TemporalFusionTransformer& model,
                            const std::shared_ptr<const data::Dataset>& dataset, const train::TrainOptions& options,
                            c10::Device device, train::ProgressReporter& progress,
                            const std::function<bool()>& stop_requested) {
  train::Trainer trainer(model, dataset, options, device);
  return finish_best(trainer, *dataset, options, device, progress, stop_requested);
}

ComparedModel compared(std::string name, std::string recipe, eval::Evaluation evaluation) {
  ComparedModel row;
  row.name = std::move(name);
  row.recipe = std::move(recipe);
  row.val = evaluation.metrics;
  row.desk = std::move(evaluation.desk);
  return row;
}

std::string epochs_range(int64_t first, int64_t last) {
  return first == last ? "epoch " + std::to_string(first)
                       : "epochs " + std::to_string(first) + "-" + std::to_string(last);
}

// The FP32 run at the point where the QAT rows take it over.
struct Fp32Snapshot {
  artifact::TrainingState state;
  artifact::NamedTensors best_weights;
};

}  // namespace

std::vector<ComparedModel> compare_accuracy(const std::shared_ptr<const data::Dataset>& shared_dataset,
                                            const CompareOptions& o, train::ProgressReporter& progress,
                                            const std::function<void(const std::string&)>& log,
                                            const std::function<bool()>& stop_requested) {
  const data::Dataset& dataset = *shared_dataset;
  std::vector<ComparedModel> rows;
  auto fp32_options = o.model;
  fp32_options.use_qat(false);
  auto qat_options = o.model;
  qat_options.use_qat(true).weight_bits(o.qat.weight_bits).activation_bits(o.qat.activation_bits);
  auto recipe = o.qat;
  recipe.two_phase = true;
  const auto plan = train::plan_two_phase(recipe, o.train, /*fp32_loaded=*/false);  // nullopt: from scratch
  const auto calibration = std::to_string(o.qat.calibration_batches) + " calibration batches";
  const auto all_epochs = std::to_string(o.train.epochs) + " epochs";

  log("[1/6] FP32" +
      (plan ? " (the QAT rows take over its run after " + epochs_range(1, plan->fp32_epochs) + ")" : ""));
  auto fp32 = model::build_model(fp32_options, o.train.seed);
  std::optional<Fp32Snapshot> snapshot;
  {
    train::Trainer trainer(fp32, shared_dataset, o.train, o.device);
    if (plan) {
      trainer.pause_after_epoch(plan->fp32_epochs);
      require_finished(trainer.fit(progress, stop_requested));
      snapshot = Fp32Snapshot{trainer.state(), trainer.best_weights()};
      trainer.pause_after_epoch(0);
    }
    rows.push_back(compared("fp32", "FP32, " + all_epochs,
                            finish_best(trainer, dataset, o.train, o.device, progress, stop_requested)));
  }

  log("[2/6] PTQ: the FP32 model, observers calibrated on " + std::to_string(o.qat.calibration_batches) +
      " batches, then frozen");
  {
    auto ptq = artifact::quantized_model(fp32_options, artifact::named_weights(*fp32), o.qat.weight_bits,
                                         o.qat.activation_bits, o.device, "FP32 weights");
    train::post_training_quantize(ptq, dataset, o.qat.calibration_batches, o.train.batch_size, o.train.seed, o.device);
    rows.push_back(compared(
        "ptq", "the FP32 model, " + calibration + ", frozen",
        eval::evaluate_for_desk(ptq, dataset, data::Split::Validation, o.train.eval_batch_size, o.device, 0.0)));
  }

  // One QAT row: from the FP32 snapshot with the plan's freezing (live_epochs >= qat_epochs:
  // never), or from scratch.
  train::TrainingEvents quiet;
  auto train_qat = [&](double live_epochs,
                       ObserverUpdateChoice update) -> std::pair<model::TemporalFusionTransformer, ComparedModel> {
    auto train = o.train;
    train.observer_update = update;
    const std::string update_words = update == ObserverUpdateChoice::Step ? " (updated once per step)" : std::string();
    if (plan) {
      auto row_plan = *plan;
      row_plan.live_epochs = live_epochs;
      auto phase = train::start_qat_phase(fp32_options, snapshot->best_weights, snapshot->state, row_plan, train,
                                          shared_dataset, o.device, nullptr, quiet, stop_requested);
      const auto qat_epochs = epochs_range(plan->fp32_epochs + 1, o.train.epochs);
      std::string how = "FP32 " + epochs_range(1, plan->fp32_epochs) + ", QAT " + qat_epochs + " at lr " +
                        format_rounded(plan->learning_rate) + ", " + calibration + ", ";
      how += live_epochs >= static_cast<double>(plan->qat_epochs) ? "live" + update_words
             : live_epochs == 0                                   ? std::string("frozen")
                                : "live " + format_rounded(live_epochs) + " epoch(s)" + update_words + ", then frozen";
      auto val = finish_best(*phase.trainer, dataset, row_plan.fine_tuning(train), o.device, progress, stop_requested);
      return {phase.model, compared("", how, std::move(val))};
    }
    auto model = model::build_model(qat_options, o.train.seed);
    model->to(o.device);  // calibration runs it on the device
    model->set_precision(o.train.precision);
    train::calibrate_observers(model, dataset, o.qat.calibration_batches, o.train.batch_size, o.train.seed, o.device,
                               {}, resolve_observer_update(update, 1));
    auto options = train;
    const bool never = live_epochs >= static_cast<double>(o.train.epochs);
    options.freeze_observers_after_epochs = never ? 0 : live_epochs;
    std::string how = "QAT from scratch, " + all_epochs + ", " + calibration + ", ";
    how += never ? "live" + update_words
                 : "live " + format_rounded(live_epochs) + " epoch(s)" + update_words + ", then frozen";
    auto val = train_best(model, shared_dataset, options, o.device, progress, stop_requested);
    return {model, compared("", how, std::move(val))};
  };

  const double frozen_live = plan ? plan->live_epochs : (o.qat.live_epochs < 0 ? 1 : o.qat.live_epochs);
  log("[3/6] QAT, two-phase: observers live for " + format_rounded(frozen_live) + " epoch(s), then frozen" +
      (plan ? ", fine-tuning the FP32 run from epoch " + std::to_string(plan->fp32_epochs + 1) : ", from scratch"));
  auto [qat_frozen, frozen_row] = train_qat(frozen_live, o.train.observer_update);
  frozen_row.name = "qat_frozen";
  rows.push_back(frozen_row);

  log("[4/6] int8: the two-phase QAT model exported to an int8 file and run with integer products on the CPU");
  {
    const TemporaryFile file("qtft-compare-int8");
    const artifact::ModelFile exported{qat_options, dataset.schema(), dataset.options(),
                                       artifact::named_weights(*qat_frozen), std::nullopt};
    artifact::export_int8_file(exported, "the two-phase QAT model", file.path);
    // Integer products run on the CPU, where a deployed int8 file runs them; the QAT model
    // it is compared against runs there too (it trained on o.device, and stays its row's).
    const c10::Device cpu(c10::kCPU);
    auto int8 = artifact::load_model(file.path, cpu);
    qat_frozen->to(cpu);
    auto agreement = eval::compare_int8_to_fake_quant(qat_frozen, int8, dataset, data::Split::Validation,
                                                      o.train.eval_batch_size, cpu);
    auto row = compared(
        "int8", "qat_frozen exported to int8",
        eval::evaluate_for_desk(int8.model, dataset, data::Split::Validation, o.train.eval_batch_size, cpu, 0.0));
    row.int8 = agreement;
    rows.push_back(std::move(row));
  }

  log("[5/6] QAT with live observers" +
      (plan ? ", fine-tuning the FP32 run from epoch " + std::to_string(plan->fp32_epochs + 1) : ", from scratch"));
  {
    auto [qat_live, live_row] = train_qat(std::numeric_limits<double>::infinity(), ObserverUpdateChoice::Immediate);
    live_row.name = "qat_live";
    rows.push_back(live_row);
  }

  log("[6/6] QAT with live observers updated once per step (--observer-update step, the data-parallel default)" +
      (plan ? ", fine-tuning the FP32 run from epoch " + std::to_string(plan->fp32_epochs + 1) : ", from scratch"));
  {
    auto [qat_step, step_row] = train_qat(std::numeric_limits<double>::infinity(), ObserverUpdateChoice::Step);
    step_row.name = "qat_step";
    rows.push_back(step_row);
  }

  for (auto& row : rows) row.degradation_pct = 100.0 * (row.val.loss - rows.front().val.loss) / rows.front().val.loss;
  return rows;
}

std::string format_comparison(const std::vector<ComparedModel>& rows) {
  std::string out = "  model        val_loss   val_rmse   degradation  coverage  IC step 1  hit rate   recipe\n";
  char buf[192];
  for (const auto& r : rows) {
    const double ic = r.desk.ic_pooled.empty() ? std::nan("") : r.desk.ic_pooled.front().ic;
    std::snprintf(buf, sizeof buf, "  %-11s %9.5f  %9.5f   %+8.2f%%    %6.3f    %7.4f    %6.3f    ", r.name.c_str(),
                  r.val.loss, r.val.rmse, r.degradation_pct, r.desk.interval_coverage, ic, r.desk.hit_rate);
    out += buf + r.recipe + "\n";
  }
  for (const auto& r : rows) {
    if (r.int8) out += eval::format_int8_agreement(*r.int8);
  }
  return out;
}

nlohmann::json to_json(const std::vector<ComparedModel>& rows, const std::vector<std::string>& series_names) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& r : rows) {
    out[r.name] = {{"val_loss", r.val.loss}, {"val_rmse", r.val.rmse},
                   {"val_mae", r.val.mae},   {"degradation_pct", r.degradation_pct},
                   {"recipe", r.recipe},     {"desk", eval::to_json(r.desk, series_names)}};
    if (r.int8) out[r.name]["against_fake_quant"] = eval::to_json(*r.int8);
  }
  return out;
}

}  // namespace qtft::train
