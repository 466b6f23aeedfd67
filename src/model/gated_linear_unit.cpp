#include "qtft/model/gated_linear_unit.h"

#include <ATen/ops/sigmoid.h>
#include <c10/util/Exception.h>

#include "qtft/memory/autocast.h"
#include "qtft/model/detail/gated_sum.h"

namespace qtft::model {

GatedLinearUnitImpl::GatedLinearUnitImpl(int64_t input_size, int64_t output_size) {
  fc = register_module("fc", Dense(input_size, output_size));
  gate_fc = register_module("gate_fc", Dense(input_size, output_size));
}

at::Tensor GatedLinearUnitImpl::forward(const at::Tensor& x) {
  const at::Tensor gate_logits = gate_fc(x);
  return at::sigmoid(gate_logits) * fc(x);
}

at::Tensor GatedLinearUnitImpl::add_to(const at::Tensor& residual, const at::Tensor& x) {
  const at::Tensor gate_logits = gate_fc(x);
  return detail::gated_residual_sum(residual, gate_logits, fc(x));
}

IntegerProductCount GatedLinearUnitImpl::use_integer_products(const IntegerWeights& weights,
                                                              const quant::ActivationFakeQuantImpl& input) {
  IntegerProductCount count = use_integer_product(*fc, weights, input);
  count += use_integer_product(*gate_fc, weights, input);
  return count;
}

GateAddNormImpl::GateAddNormImpl(GateAddNormOptions options) : options_(options) {
  dropout = register_module("dropout", Dropout(options.dropout()));
  glu = register_module("glu", GatedLinearUnit(options.input_size(), options.output_size()));
  layer_norm =
      register_module("layer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.output_size()})));
}

at::Tensor GateAddNormImpl::forward(const at::Tensor& x, const at::Tensor& skip) {
  TORCH_CHECK(skip.dim() >= 1 && skip.size(-1) == options_.output_size(), "GateAddNorm: expected a skip input with ",
              options_.output_size(), " features, got shape ", skip.sizes());
  // The sum and its norm in FP32 under --precision bf16 (a bf16 gate's output is widened by the sum).
  return layer_norm(glu->add_to(memory::full_precision(skip), dropout(x)));
}

}  // namespace qtft::model
