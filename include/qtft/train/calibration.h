#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>

#include "qtft/common/error.h"
#include "qtft/data/features/dataset.h"
#include "qtft/dist/ranks.h"
#include "qtft/model/tft.h"
#include "qtft/quant/observer_update.h"

namespace qtft::train {

// Runs `batches` training batches forward without gradients so that every observer sees
// real activations before training (or, for PTQ, instead of it). Dropout is off; only the
// observers are in training mode. Each observer's sample count grows by `batches`.
// The batches come from their own seeded order, so the training batch order is unchanged.
// `stop_requested` is polled after every batch; when it says so, throws Interrupted.
// With `update` Step, each batch's forward quantizes with the parameters the batch began
// with and every observer takes the batch in at its end, as a training step does.
// Across ranks, each batch is a global batch of batch_size per rank: each rank runs its
// share, as a training step does, and the step's one collective (dist::Ranks::end_step)
// gives every observer the global batch's extremes and every rank the stop request. The
// observers then take in what one process with the global batch size would; across ranks
// the update is Step whatever `update` says.
void calibrate_observers(model::TemporalFusionTransformer& model, const data::Dataset& dataset, int64_t batches,
                         size_t batch_size, uint64_t seed, c10::Device device,
                         const std::function<bool()>& stop_requested = {},
                         quant::ObserverUpdate update = quant::ObserverUpdate::Immediate,
                         const dist::Ranks& ranks = dist::Ranks());

// Thrown when a stop was requested before training began: there is nothing to save.
class Interrupted : public Error {
 public:
  using Error::Error;
};

}  // namespace qtft::train
