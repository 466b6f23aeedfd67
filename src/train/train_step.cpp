#include "qtft/train/train_step.h"

#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/optimizer.h>

#include "qtft/train/quantile_loss.h"

namespace qtft::train {

at::Tensor training_step(model::TemporalFusionTransformer& model, torch::optim::Optimizer& optimizer,
                         const data::Batch& batch, double clip_norm, c10::Device device) {
  auto out = model->forward(batch.observed.to(device), batch.known.to(device), batch.symbol.to(device));
  auto loss = quantile_loss(out.quantiles, batch.target.to(device), model->options().quantiles());
  optimizer.zero_grad();
  loss.backward();
  if (clip_norm > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), clip_norm);
  optimizer.step();
  return loss.detach();
}

}  // namespace qtft::train
