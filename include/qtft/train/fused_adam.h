#pragma once

#include <torch/optim/adam.h>

#include <vector>

namespace qtft::train {

// torch::optim::Adam whose step() updates every parameter of a group in one call of ATen's
// fused Adam kernel (at::_fused_adam_) instead of about ten ATen calls per parameter: the
// TFT has 282 parameter tensors, and those calls were a visible share of a small model's
// step. The state is Adam's own (AdamParamState: step, exp_avg, exp_avg_sq), so saving,
// resuming and measuring it work as for torch::optim::Adam, and so do the options (lr,
// betas, eps, L2 weight decay). The arithmetic is Adam's, computed by the fused kernel:
// equal to torch::optim::Adam's to rounding, not bit for bit (tested). amsgrad falls back
// to torch::optim::Adam's step.
class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(const std::vector<at::Tensor>& params, torch::optim::AdamOptions options)
      : torch::optim::Adam(params, std::move(options)) {}

  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace qtft::train
