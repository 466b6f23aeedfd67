#pragma once

// A model's quantiles on a split with and without split conformal offsets fitted on another
// split (eval/conformal.h): what `qtft evaluate --conformal split` reports.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/conformal.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

// Coverage of one set of quantiles over a split's outcomes, in the model's scaled units.
struct QuantileCoverage {
  std::vector<double> below;  // per level: the share of outcomes at or below that quantile
  double interval = 0.0;      // the share inside [lowest level, highest level]
  double loss = 0.0;          // mean pinball loss
};

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

// Forecasts every window of `calibration` (the validation split) to fit the offsets, and
// measures both sets of quantiles on `measured`, the forecasts of `split` gathered by the
// caller. Throws qtft::Error when either has no windows; check_conformal_splits first.
ConformalEvaluation evaluate_split_conformal(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                             data::Split calibration, data::Split split, const SplitForecasts& measured,
                                             size_t batch_size, c10::Device device);

nlohmann::json to_json(const ConformalEvaluation& evaluation);

}  // namespace qtft::eval
