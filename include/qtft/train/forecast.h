#pragma once

#include <c10/core/Device.h>

#include "qtft/data/dataset.h"
#include "qtft/data/forecast_table.h"
#include "qtft/model/tft.h"

namespace qtft::train {

// Forecasts for every window of `split` in original units. Quantile q of step h is a
// one-bar log return r_q(h) = forecast * target_scale; its implied close is
//   origin_close * exp(sum of the median returns of steps before h + r_q(h)),
// i.e. the median path up to the previous step, then quantile q for step h.
data::ForecastTable forecast_split(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                   data::Split split, size_t batch_size, c10::Device device);

}  // namespace qtft::train
