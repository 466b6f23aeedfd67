#include "qtft/eval/compare_accuracy.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"
#include "qtft/infer/model_file.h"
#include "qtft/infer/model_io.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/trainer.h"
#include "qtft/train/workflow.h"

namespace qtft::eval {
namespace {

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

  log("[1/4] FP32");
  auto fp32 = infer::build_model(fp32_options, o.train.seed);
  rows.push_back({"fp32", train_best(fp32, shared_dataset, o.train, o.device, progress, stop_requested)});

  log("[2/4] PTQ: the FP32 model, observers calibrated on " + std::to_string(o.calibration_batches) +
      " batches, then frozen");
  {
    auto ptq = infer::build_model(qat_options, o.train.seed);
    infer::copy_weights_into(*ptq, infer::named_weights(*fp32), "FP32 weights", /*observers_may_be_missing=*/true);
    ptq->to(o.device);
    train::post_training_quantize(ptq, dataset, o.calibration_batches, o.train.batch_size, o.train.seed, o.device);
    rows.push_back({"ptq", evaluate_model(ptq, dataset, data::Split::Validation, o.train.eval_batch_size, o.device)});
  }

  log("[3/4] QAT, two-phase: calibrate, " + std::to_string(o.live_epochs) + " epoch(s) live, then frozen");
  {
    auto qat = infer::build_model(qat_options, o.train.seed);
    train::calibrate_observers(qat, dataset, o.calibration_batches, o.train.batch_size, o.train.seed, o.device);
    auto options = o.train;
    options.freeze_observers_after_epochs = o.live_epochs;
    rows.push_back({"qat_frozen", train_best(qat, shared_dataset, options, o.device, progress, stop_requested)});
  }

  log("[4/4] QAT with live observers");
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
  return out;
}

nlohmann::json to_json(const std::vector<ComparedModel>& rows) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& r : rows) {
    out[r.name] = {{"val_loss", r.val.loss}, {"val_rmse", r.val.rmse}, {"val_mae", r.val.mae},
                   {"degradation_pct", r.degradation_pct}};
  }
  return out;
}

}  // namespace qtft::eval
