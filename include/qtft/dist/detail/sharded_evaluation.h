#pragma once

#include <c10/core/Device.h>

#include <cstddef>
#include <functional>
#include <optional>

#include "qtft/data/features/dataset.h"
#include "qtft/dist/collective.h"
#include "qtft/eval/metrics.h"
#include "qtft/model/tft.h"

namespace qtft::dist {

// eval::evaluate_model_unless_stopped shared out over the group: the split's batches go
// round by round, world_size at a time, rank r running the r-th of each round. After each
// round one all-reduce hands every rank the round's forecasts and targets (each rank adds
// zeros outside its own rows, which leaves the others' values exact), and every rank adds
// them to the metrics in batch order. The figures are therefore bitwise those of one
// process walking the whole split, on every rank, in about 1/world_size of the time.
// `stop_requested` is polled after every round (the same number of times on every rank; a
// dist::stop_on_any_rank callback keeps the ranks agreeing): nullopt when it stopped.
std::optional<eval::ForecastMetrics> evaluate_sharded(Collective& group, model::TemporalFusionTransformer& model,
                                                      const data::Dataset& dataset, data::Split split,
                                                      size_t batch_size, c10::Device device,
                                                      const std::function<bool()>& stop_requested);

}  // namespace qtft::dist
