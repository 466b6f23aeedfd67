#include "qtft/eval/compare_accuracy.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <nlohmann/json.hpp>

#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"
#include "qtft/infer/int8_file.h"
#include "qtft/infer/model_file.h"
#include "qtft/infer/model_io.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/trainer.h"
#include "qtft/train/workflow.h"

namespace qtft::eval {
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

// Trains `model` and leaves it holding its best epoch's weights.
ForecastMetrics train_best(model::TemporalFusionTransformer& model, const std::shared_ptr<const data::Dataset>& dataset,
                           const train::TrainOptions& options, c10::Device device, train::ProgressReporter& progress,
                           const std::function<bool()>& stop_requested) {
  train::Trainer trainer(model, dataset, options, device);
  if (trainer.fit(progress, stop_requested).interrupted) {
    // A comparison of half-trained models would mislead; there is no single run to resume.
    throw Error("interrupted: the accuracy comparison stopped before it finished; nothing was saved");
  }
  infer::copy_weights_into(*model, trainer.best_weights(), "best weights");
  return evaluate_model(model, *dataset, data::Split::Validation, options.eval_batch_size, device);
}

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
  qat_options.use_qat(true).weight_bits(o.weight_bits).activation_bits(o.activation_bits);

  log("[1/5] FP32");
  auto fp32 = infer::build_model(fp32_options, o.train.seed);
  rows.push_back({"fp32", train_best(fp32, shared_dataset, o.train, o.device, progress, stop_requested)});

  log("[2/5] PTQ: the FP32 model, observers calibrated on " + std::to_string(o.calibration_batches) +
      " batches, then frozen");
  {
    auto ptq = infer::build_model(qat_options, o.train.seed);
    infer::copy_weights_into(*ptq, infer::named_weights(*fp32), "FP32 weights", /*observers_may_be_missing=*/true);
    ptq->to(o.device);
    train::post_training_quantize(ptq, dataset, o.calibration_batches, o.train.batch_size, o.train.seed, o.device);
    rows.push_back({"ptq", evaluate_model(ptq, dataset, data::Split::Validation, o.train.eval_batch_size, o.device)});
  }

  log("[3/5] QAT, two-phase: calibrate, " + std::to_string(o.live_epochs) + " epoch(s) live, then frozen");
  auto qat_frozen = infer::build_model(qat_options, o.train.seed);
  train::calibrate_observers(qat_frozen, dataset, o.calibration_batches, o.train.batch_size, o.train.seed, o.device);
  auto frozen_options = o.train;
  frozen_options.freeze_observers_after_epochs = o.live_epochs;
  rows.push_back({"qat_frozen", train_best(qat_frozen, shared_dataset, frozen_options, o.device, progress, stop_requested)});

  log("[4/5] int8: the two-phase QAT model exported to an int8 file and run with integer products");
  {
    const TemporaryFile file("qtft-compare-int8");
    const infer::ModelFile exported{qat_options, dataset.spec(), dataset.options(), infer::named_weights(*qat_frozen),
                                    std::nullopt};
    infer::export_int8_file(exported, "the two-phase QAT model", file.path);
    auto int8 = infer::load_model(file.path, o.device);
    auto agreement = compare_int8_to_fake_quant(qat_frozen, int8, dataset, data::Split::Validation,
                                                o.train.eval_batch_size, o.device);
    rows.push_back({"int8", agreement.int8, 0.0, agreement});
  }

  log("[5/5] QAT with live observers");
  {
    auto qat = infer::build_model(qat_options, o.train.seed);
    train::calibrate_observers(qat, dataset, o.calibration_batches, o.train.batch_size, o.train.seed, o.device);
    rows.push_back({"qat_live", train_best(qat, shared_dataset, o.train, o.device, progress, stop_requested)});
  }

  for (auto& row : rows) row.degradation_pct = 100.0 * (row.val.loss - rows.front().val.loss) / rows.front().val.loss;
  return rows;
}

std::string format_comparison(const std::vector<ComparedModel>& rows) {
  std::string out = "  model        val_loss   val_rmse   degradation\n";
  char buf[128];
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "  %-11s %9.5f  %9.5f   %+8.2f%%\n", r.name.c_str(), r.val.loss, r.val.rmse,
                  r.degradation_pct);
    out += buf;
  }
  for (const auto& r : rows) {
    if (r.int8) out += format_int8_agreement(*r.int8);
  }
  return out;
}

nlohmann::json to_json(const std::vector<ComparedModel>& rows) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& r : rows) {
    out[r.name] = {{"val_loss", r.val.loss}, {"val_rmse", r.val.rmse}, {"val_mae", r.val.mae},
                   {"degradation_pct", r.degradation_pct}};
    if (r.int8) out[r.name]["against_fake_quant"] = to_json(*r.int8);
  }
  return out;
}

}  // namespace qtft::eval
