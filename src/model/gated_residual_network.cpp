#include "qtft/model/gated_residual_network.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/elu.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include "qtft/memory/autocast.h"

namespace qtft::model {

GatedResidualNetworkImpl::GatedResidualNetworkImpl(GatedResidualNetworkOptions options) : options_(options) {
  const auto& o = options_;
  TORCH_CHECK(o.input_size() > 0 && o.hidden_size() > 0 && o.output_size() > 0 && o.context_size() >= 0,
              "GatedResidualNetwork: sizes must be positive (context_size may be 0), got input ", o.input_size(),
              ", hidden ", o.hidden_size(), ", output ", o.output_size(), ", context ", o.context_size());
  fc1 = register_module("fc1", Dense(o.input_size(), o.hidden_size()));
  if (o.context_size() > 0) {
    // No bias: fc1 already has one, and a second would only duplicate it.
    context_projection =
        register_module("context_projection", Dense(DenseOptions(o.context_size(), o.hidden_size()).bias(false)));
  }
  fc2 = register_module("fc2", Dense(o.hidden_size(), o.hidden_size()));
  dropout = register_module("dropout", Dropout(o.dropout()));
  gate = register_module("gate", GatedLinearUnit(o.hidden_size(), o.output_size()));
  if (o.input_size() != o.output_size()) {
    skip_projection = register_module("skip_projection", Dense(o.input_size(), o.output_size()));
  }
  layer_norm = register_module("layer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.output_size()})));
}

at::Tensor GatedResidualNetworkImpl::forward(const at::Tensor& a, const at::Tensor& context) {
  return finish(fc1(a), skip_projection ? skip_projection(a) : a, context, a.dim());
}

at::Tensor GatedResidualNetworkImpl::forward_concatenated(const std::vector<at::Tensor>& parts,
                                                          const at::Tensor& context) {
  TORCH_CHECK(!parts.empty(), "GatedResidualNetwork: expected at least one input part");
  // Without gradient nothing is kept for a backward pass, and one wide product beats one
  // narrow product per part (forecasting 64 series of the small model: 105-132 ms with the
  // narrow products, 65-74 ms with the wide one).
  if (!c10::GradMode::is_enabled()) return forward(at::cat(parts, -1), context);
  const at::Tensor skip = skip_projection ? skip_projection->forward_concatenated(parts) : at::cat(parts, -1);
  return finish(fc1->forward_concatenated(parts), skip, context, parts.front().dim());
}

IntegerProductCount GatedResidualNetworkImpl::use_integer_products(const IntegerWeights& weights,
                                                                   const quant::ActivationFakeQuantImpl* input) {
  TORCH_CHECK(fc2->qat_enabled(), "GatedResidualNetwork: integer products need a QAT model");
  IntegerProductCount count = gate->use_integer_products(weights, *fc2->output_quant);
  if (input != nullptr) {
    count += use_integer_product(*fc1, weights, *input);
    if (skip_projection) count += use_integer_product(*skip_projection, weights, *input);
  }
  return count;
}

at::Tensor GatedResidualNetworkImpl::finish(at::Tensor hidden, const at::Tensor& skip, const at::Tensor& context,
                                            int64_t input_dim) {
  if (context_projection) {
    TORCH_CHECK(context.defined(), "GatedResidualNetwork: built with context_size ", options_.context_size(),
                " but called without a context");
    TORCH_CHECK(context.dim() >= 1 && context.dim() <= input_dim,
                "GatedResidualNetwork: context must have between 1 and ", input_dim, " dimensions, got shape ",
                context.sizes());
    at::Tensor c = context_projection(context);
    // A static context [B, C] meets temporal inputs [B, T, ...]: insert the time axes.
    while (c.dim() < hidden.dim()) c = c.unsqueeze(-2);
    hidden = hidden + c;
  } else {
    TORCH_CHECK(!context.defined(),
                "GatedResidualNetwork: called with a context but built without one "
                "(set context_size)");
  }
  hidden = fc2(at::elu(hidden));
  // The sum and its norm in FP32 under --precision bf16 (a bf16 gate's output is widened by the sum).
  return layer_norm(gate->add_to(memory::full_precision(skip), dropout(hidden)));
}

}  // namespace qtft::model
