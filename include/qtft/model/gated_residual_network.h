#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "qtft/model/dense.h"
#include "qtft/model/dropout.h"
#include "qtft/model/gated_linear_unit.h"

namespace qtft::model {

struct GatedResidualNetworkOptions {
  GatedResidualNetworkOptions(int64_t input_size, int64_t hidden_size, int64_t output_size)
      : input_size_(input_size), hidden_size_(hidden_size), output_size_(output_size) {}
  TORCH_ARG(int64_t, input_size);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(int64_t, output_size);
  TORCH_ARG(double, dropout) = 0.0;
  // Width of the optional static context c; 0 means the GRN takes none.
  TORCH_ARG(int64_t, context_size) = 0;
};

// The GRN of Lim et al. (eqs. 2-4):
//   eta2 = ELU(fc1(a) + context_projection(c))      context projection has no bias
//   eta1 = fc2(eta2)
//   out  = LayerNorm(skip(a) + GLU(dropout(eta1)))  skip = a, or skip_projection(a) when
//                                                   input and output widths differ
// A GRN can learn to become the identity (gate closed), which is how the TFT skips
// nonlinear processing that the data does not support.
class GatedResidualNetworkImpl : public torch::nn::Module {
 public:
  explicit GatedResidualNetworkImpl(GatedResidualNetworkOptions options);

  // a: [..., input_size]. context: undefined, or [..., context_size] with the leading
  // dimensions of a, or with fewer (a static [B, C] context broadcasts over a's time axis).
  at::Tensor forward(const at::Tensor& a, const at::Tensor& context = {});
  // forward(at::cat(parts, -1), context), never holding the concatenation when gradient
  // is on (see Dense::forward_concatenated); without gradient it concatenates, which is
  // faster and keeps nothing.
  at::Tensor forward_concatenated(const std::vector<at::Tensor>& parts, const at::Tensor& context = {});

  // Int8 inference (DenseImpl::use_integer_product): the gate's two products take fc2's
  // output (dropout aside), so they can always run in integers; fc1 and the skip projection
  // take the GRN's input, and can when `input` is the observer that always produces it
  // (nullptr when there is none). fc2 takes an ELU of a sum and stays in float, as does the
  // context projection, whose input has no observer.
  IntegerProductCount use_integer_products(const IntegerWeights& weights, const quant::ActivationFakeQuantImpl* input);

  const GatedResidualNetworkOptions& options() const { return options_; }

  Dense fc1{nullptr};
  Dense context_projection{nullptr};  // registered only when context_size > 0
  Dense fc2{nullptr};
  Dropout dropout{nullptr};
  GatedLinearUnit gate{nullptr};
  Dense skip_projection{nullptr};  // registered only when input_size != output_size
  torch::nn::LayerNorm layer_norm{nullptr};

 private:
  // Everything after fc1 and the skip path: context, ELU, fc2, dropout, gate, add & norm.
  at::Tensor finish(at::Tensor hidden, const at::Tensor& skip, const at::Tensor& context, int64_t input_dim);

  GatedResidualNetworkOptions options_;
};
TORCH_MODULE(GatedResidualNetwork);

}  // namespace qtft::model
