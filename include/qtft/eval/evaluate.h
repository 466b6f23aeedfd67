#pragma once

#include <c10/core/Device.h>

#include <functional>

#include "qtft/data/batch.h"
#include "qtft/data/dataset.h"
#include "qtft/model/tft.h"
#include "qtft/eval/metrics.h"

namespace qtft::eval {

// Runs the model in eval mode without gradients over every window of `split`, in order.
ForecastMetrics evaluate_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                               data::Split split, size_t batch_size, c10::Device device);

// The same walk, handing each batch and its output to `visit` (prediction, explanation).
void for_each_forecast(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                       size_t batch_size, c10::Device device,
                       const std::function<void(const data::Batch&, const model::TftOutput&)>& visit);

}  // namespace qtft::eval
