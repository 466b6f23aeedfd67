#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace qtft::model {

// Inverted dropout: in training each element is kept with probability 1 - p and scaled by
// 1 / (1 - p), else zeroed; outside training x itself. The gradient is the same mask.
//
// On the CPU the mask comes from ATen's counter-based Philox engine, keyed by one 64-bit
// draw from the default CPU generator per call: LibTorch's own dropout draws every element
// from that generator serially (Mersenne Twister, bernoulli_), which cost 12% of a
// paper-sized training step and twice that under checkpointing (docs/PERFORMANCE.md). Each
// element takes 16 random bits, so the keep probability is rounded to a multiple of
// 1/65536. The mask is a function of that draw alone: the same on any number of threads,
// and the same again whenever the generator is restored (the checkpoint's recompute).
// The backward pass keeps one bit per element, not a mask of x's type. Given a `layer` (any
// address that names the call site), a checkpointed segment records the bits in its first
// forward and its recompute replays them instead of drawing them again.
// Elsewhere (CUDA) this is LibTorch's dropout, whose fused kernel is fast.
at::Tensor apply_dropout(const at::Tensor& x, double p, bool training, const void* layer = nullptr);

// apply_dropout() as a module, for the layers' submodule trees ("dropout", "attention_dropout").
class DropoutImpl : public torch::nn::Module {
 public:
  explicit DropoutImpl(double p);

  at::Tensor forward(const at::Tensor& x) { return apply_dropout(x, p_, is_training(), this); }

  double p() const { return p_; }

 private:
  double p_;
};
TORCH_MODULE(Dropout);

}  // namespace qtft::model
