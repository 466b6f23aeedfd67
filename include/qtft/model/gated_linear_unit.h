#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "qtft/model/dense.h"
#include "qtft/model/dropout.h"

namespace qtft::model {

// GLU(x) = sigmoid(gate_fc(x)) * fc(x)  (W4/b4 and W5/b5 in Lim et al., eq. 5). The gate lets
// the network scale a whole block down to nothing where it is not needed.
class GatedLinearUnitImpl : public torch::nn::Module {
 public:
  GatedLinearUnitImpl(int64_t input_size, int64_t output_size);

  at::Tensor forward(const at::Tensor& x);
  // residual + forward(x), fused (detail::gated_residual_sum): the GLU's use in a residual
  // network and a gated skip connection.
  at::Tensor add_to(const at::Tensor& residual, const at::Tensor& x);
  // Both products in integers (DenseImpl::use_integer_product), fed by `input`.
  IntegerProductCount use_integer_products(const IntegerWeights& weights, const quant::ActivationFakeQuantImpl& input);

  Dense fc{nullptr};       // the value path, W5 x + b5
  Dense gate_fc{nullptr};  // the gate's logits, W4 x + b4
};
TORCH_MODULE(GatedLinearUnit);

struct GateAddNormOptions {
  GateAddNormOptions(int64_t input_size, int64_t output_size) : input_size_(input_size), output_size_(output_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, output_size);
  TORCH_ARG(double, dropout) = 0.0;
};

// GateAddNorm(x, skip) = LayerNorm(skip + GLU(dropout(x))): the gated skip connection the
// paper puts around the LSTM, the attention and the whole temporal block. It lives with the
// GLU because it is nothing more than a GLU with its residual and normalization.
class GateAddNormImpl : public torch::nn::Module {
 public:
  explicit GateAddNormImpl(GateAddNormOptions options);

  at::Tensor forward(const at::Tensor& x, const at::Tensor& skip);
  // The GLU's products in integers, when x is always `input`'s output (dropout aside,
  // which inference skips).
  IntegerProductCount use_integer_products(const IntegerWeights& weights, const quant::ActivationFakeQuantImpl& input) {
    return glu->use_integer_products(weights, input);
  }

  const GateAddNormOptions& options() const { return options_; }

  Dropout dropout{nullptr};
  GatedLinearUnit glu{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};

 private:
  GateAddNormOptions options_;
};
TORCH_MODULE(GateAddNorm);

}  // namespace qtft::model
