#pragma once

// A model's quantiles on a split with and without split conformal offsets fitted on another
// split (eval/conformal.h): what `qtft evaluate --conformal split` reports.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "qtft/artifact/model_file.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/conformal.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

// A split's scaled quantiles and outcomes, gathered batch by batch from a walk the caller
// runs anyway (a for_each_forecast or evaluate_for_desk visitor), so that measuring them
// costs no second pass.
class SplitForecasts {
 public:
  void add(const data::Batch& batch, const model::TftOutput& output);
  int64_t windows() const { return windows_; }
  // [windows, horizon, levels] and [windows, horizon], in order of addition.
  std::vector<double> quantiles() const;
  std::vector<double> outcomes() const;

 private:
  std::vector<at::Tensor> quantiles_, outcomes_;
  int64_t windows_ = 0;
};

// The coverage of a split's gathered quantiles over its outcomes.
QuantileCoverage coverage_of(const SplitForecasts& forecasts, const std::vector<double>& levels);

struct ConformalEvaluation {
  ConformalOffsets offsets;  // fitted on the calibration split
  int64_t calibration_windows = 0;
  int64_t windows = 0;            // of the evaluated split
  double nominal_interval = 0.0;  // highest level minus lowest
  QuantileCoverage raw, conformal;
};

// Throws qtft::UsageError when `split` is `calibration` or holds it (All): coverage measured
// where the offsets were fitted is in-sample.
void check_conformal_splits(data::Split calibration, data::Split split);

// Split conformal offsets of `model`, fitted on every window of `calibration` (the validation
// split), and how many windows that was. Throws qtft::Error when the split has no windows.
struct FittedOffsets {
  ConformalOffsets offsets;
  int64_t windows = 0;
};
FittedOffsets fit_split_offsets(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                data::Split calibration, size_t batch_size, c10::Device device);

// Forecasts every window of `calibration` (the validation split) to fit the offsets, and
// measures both sets of quantiles on `measured`, the forecasts of `split` gathered by the
// caller. Throws qtft::Error when either has no windows; check_conformal_splits first.
ConformalEvaluation evaluate_split_conformal(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                             data::Split calibration, data::Split split, const SplitForecasts& measured,
                                             size_t batch_size, c10::Device device);

nlohmann::json to_json(const ConformalEvaluation& evaluation);

// `quantiles` ([windows, horizon, levels], the model's scaled units) of `batch`'s windows
// moved by the offsets `calibration` holds for each window's symbol, crossing ones sorted:
// a new tensor of the same dtype on the same device.
at::Tensor with_conformal_offsets(const artifact::ConformalCalibration& calibration, const data::Dataset& dataset,
                                  const data::Batch& batch, const at::Tensor& quantiles);

// A walk's windows issued with fixed offsets (a model file's split ones), the model's own
// quantiles and the issued ones each tallied against the outcomes, with each outcome's scale
// for the loss in the target's units: what `qtft backtest --conformal split` reports per fold.
class FixedConformalTallies {
 public:
  FixedConformalTallies(artifact::ConformalCalibration calibration, const std::vector<double>& levels);
  // Tallies the batch; returns its quantiles as issued (a CPU double tensor, contiguous).
  at::Tensor add(const data::Dataset& dataset, const data::Batch& batch, const at::Tensor& quantiles);
  QuantileCoverage raw() const { return raw_.result(); }
  QuantileCoverage conformal() const { return conformal_.result(); }
  const artifact::ConformalCalibration& calibration() const { return calibration_; }

 private:
  artifact::ConformalCalibration calibration_;
  CoverageTally raw_, conformal_;
};

}  // namespace qtft::eval
