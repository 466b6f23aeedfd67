#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <optional>
#include <span>

#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/desk_metrics.h"
#include "qtft/eval/metrics.h"
#include "qtft/eval/window_units.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

// Runs the model in eval mode without gradients over every window of `split`, in order.
ForecastMetrics evaluate_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                               size_t batch_size, c10::Device device);

// evaluate_model, and the desk's metrics of the same forecasts (in the target's units, each
// window's series and first forecast bar from the dataset): one pass, handing each batch and
// its output to `visit` as well when given (predict's rows).
struct Evaluation {
  ForecastMetrics metrics;
  DeskMetrics desk;
};
Evaluation evaluate_for_desk(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                             size_t batch_size, c10::Device device, double cost_bps,
                             const std::function<void(const data::Batch&, const model::TftOutput&)>& visit = {});

// evaluate_for_desk over the windows at `indices` of `split` (a walk-forward fold's), in
// that order, handing each batch and its output to `visit` as well when given.
Evaluation evaluate_windows_for_desk(
    model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
    std::span<const size_t> indices, size_t batch_size, c10::Device device, double cost_bps,
    const std::function<void(const data::Batch&, const model::TftOutput&)>& visit = {});

// The same walk, handing each batch and its output to `visit` (prediction, explanation).
// `stop_requested`, polled after every batch, ends the walk early; returns false then.
bool for_each_forecast(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                       size_t batch_size, c10::Device device,
                       const std::function<void(const data::Batch&, const model::TftOutput&)>& visit,
                       const std::function<bool()>& stop_requested = {});
// The same over the windows at `indices` of `split`, in that order.
bool for_each_forecast(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                       std::span<const size_t> indices, size_t batch_size, c10::Device device,
                       const std::function<void(const data::Batch&, const model::TftOutput&)>& visit,
                       const std::function<bool()>& stop_requested = {});

// evaluate_model that a stop request can cut short (the trainer's validation pass):
// nullopt when it was.
std::optional<ForecastMetrics> evaluate_model_unless_stopped(model::TemporalFusionTransformer& model,
                                                             const data::Dataset& dataset, data::Split split,
                                                             size_t batch_size, c10::Device device,
                                                             const std::function<bool()>& stop_requested);

}  // namespace qtft::eval
