#pragma once

#include <c10/core/Device.h>

#include <vector>

#include "qtft/data/bars/forecast_table.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/model/tft.h"

namespace qtft::infer {

// How a series' scaled target converts back: the spec's transform and the series' center
// and scale (its own under per-series normalization).
struct TargetUnits {
  data::TargetTransform transform = data::TargetTransform::LogReturn;
  double center = 0.0, scale = 1.0;
};
TargetUnits target_units(const data::InputSchema& spec, int64_t symbol_id);

// One window's forecast in original units. `scaled` holds horizon x quantiles values of
// the scaled target, as the model gives them; `returns` and `prices` receive as many:
//   return  = scaled * scale + center: the transformed target (a log return by default)
//   price   = the target column's value it implies (the close by default):
//     log-return  origin_close * exp(sum of the median returns of the steps before + return)
//     none        return;  log  exp(return);  log1p  exp(return) - 1
// `origin_close` is the target column's last value. The backtest (forecast_split) and the
// serving path (Forecaster) both convert with it.
void to_original_units(const double* scaled, int64_t horizon, int64_t num_quantiles, int64_t median,
                       const TargetUnits& units, double origin_close, double* returns, double* prices);

// Forecasts for every window of `split` in original units. Quantile q of step h is a
// one-bar log return r_q(h) = forecast * target_scale; its implied close is
//   origin_close * exp(sum of the median returns of steps before h + r_q(h)),
// i.e. the median path up to the previous step, then quantile q for step h.
data::ForecastTable forecast_split(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                   data::Split split, size_t batch_size, c10::Device device);

// forecast_split's rows, batch by batch: for a walk that does more with the same forecasts
// (predict's desk metrics).
class ForecastTableBuilder {
 public:
  ForecastTableBuilder(const data::Dataset& dataset, std::vector<double> quantiles, int64_t median);
  void add(const data::Batch& batch, const model::TftOutput& out);
  data::ForecastTable take() { return std::move(table_); }

 private:
  const data::Dataset& dataset_;
  int64_t median_;
  data::ForecastTable table_;
};

}  // namespace qtft::infer
