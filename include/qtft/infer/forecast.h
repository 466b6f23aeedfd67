#pragma once

#include <c10/core/Device.h>

#include "qtft/data/dataset.h"
#include "qtft/data/forecast_table.h"
#include "qtft/model/tft.h"

namespace qtft::infer {

// One window's forecast in original units. `scaled` holds horizon x quantiles values of
// the scaled target, as the model gives them; `returns` and `prices` receive as many:
//   return  = scaled * target_scale
//   price   = origin_close * exp(sum of the median returns of the steps before + return)
// The backtest (forecast_split) and the serving path (Forecaster) both convert with it.
void to_original_units(const double* scaled, int64_t horizon, int64_t num_quantiles, int64_t median,
                       double target_scale, double origin_close, double* returns, double* prices);

// Forecasts for every window of `split` in original units. Quantile q of step h is a
// one-bar log return r_q(h) = forecast * target_scale; its implied close is
//   origin_close * exp(sum of the median returns of steps before h + r_q(h)),
// i.e. the median path up to the previous step, then quantile q for step h.
data::ForecastTable forecast_split(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                   data::Split split, size_t batch_size, c10::Device device);

}  // namespace qtft::infer
