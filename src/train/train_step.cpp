#include "qtft/train/train_step.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <vector>

#include "qtft/common/error.h"
#include "qtft/data/features/batch_order.h"
#include "qtft/eval/quantile_loss.h"

namespace qtft::train {

data::Batch first_training_batch(const data::Dataset& dataset, const TrainOptions& options) {
  const size_t windows = dataset.num_windows(data::Split::Train);
  if (windows == 0) throw Error("the training split has no windows");
  const auto order = data::BatchOrder(windows, options.batch_size, options.seed, true).epoch_order(0);
  const std::vector<size_t> first = order.slice(0, std::min(windows, options.batch_size));
  return data::make_batch(dataset, data::Split::Train, first);
}

at::Tensor training_step(model::TemporalFusionTransformer& model, torch::optim::Optimizer& optimizer,
                         const data::Batch& batch, double clip_norm, c10::Device device,
                         const std::function<void()>& after_backward) {
  auto out = model->forward(batch.observed.to(device), batch.known.to(device), batch.symbol.to(device),
                            batch.statics.to(device));
  auto loss = eval::quantile_loss(out.quantiles, batch.target.to(device), model->options().quantiles());
  optimizer.zero_grad();
  loss.backward();
  if (after_backward) after_backward();
  if (clip_norm > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), clip_norm);
  optimizer.step();
  return loss.detach();
}

}  // namespace qtft::train
