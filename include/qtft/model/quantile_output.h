#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "qtft/model/dense.h"

namespace qtft::model {

// The forecast head: one linear map per decoder step from the hidden state to Q quantiles
// (Lim et al., eq. 26). A module of its own so that its path, quantile_outputs.output_layer,
// names the output layer for quantization (often kept in higher precision).
class QuantileOutputImpl : public torch::nn::Module {
 public:
  QuantileOutputImpl(int64_t hidden_size, int64_t num_quantiles) {
    output_layer = register_module("output_layer", Dense(hidden_size, num_quantiles));
  }

  // [B, H, hidden] -> [B, H, Q]
  at::Tensor forward(const at::Tensor& x) { return output_layer(x); }

  Dense output_layer{nullptr};
};
TORCH_MODULE(QuantileOutput);

}  // namespace qtft::model
