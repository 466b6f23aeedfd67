#pragma once

#include <functional>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "qtft/data/features/batch.h"
#include "qtft/model/tft.h"
#include "qtft/train/train_options.h"

namespace torch::optim {
class Optimizer;
}

namespace qtft::train {

// The batch a run starts with: the first batch_size windows of epoch 1's shuffled training
// order for options.seed. Throws qtft::Error when the training split has no windows.
data::Batch first_training_batch(const data::Dataset& dataset, const TrainOptions& options);

// One optimizer step on a batch, exactly as the trainer takes it: forward, quantile loss,
// zero_grad, backward, `after_backward` (data parallelism averages the gradients there),
// clipping by global norm (clip_norm 0: none), optimizer step. Returns the loss (detached,
// on `device`).
at::Tensor training_step(model::TemporalFusionTransformer& model, torch::optim::Optimizer& optimizer,
                         const data::Batch& batch, double clip_norm, c10::Device device,
                         const std::function<void()>& after_backward = {});

}  // namespace qtft::train
