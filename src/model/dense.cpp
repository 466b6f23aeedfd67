#include "qtft/model/dense.h"

#include <ATen/ops/linear.h>
#include <c10/util/Exception.h>

#include "qtft/quant/weight_fake_quant.h"

namespace qtft::model {

DenseImpl::DenseImpl(DenseOptions options) : options_(options) {
  linear = register_module("linear", torch::nn::Linear(torch::nn::LinearOptions(options.in_features(), options.out_features())
                                                           .bias(options.bias())));
}

at::Tensor DenseImpl::forward(const at::Tensor& x) {
  // Checked here because the matmul's own message names neither layer nor expected size.
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.in_features(), "Dense: expected input with ",
              options_.in_features(), " features in the last dimension, got shape ", x.sizes());
  if (!qat_enabled()) return linear(x);
  return output_quant(at::linear(x, weight_in_use(), linear->bias));
}

at::Tensor DenseImpl::forward_concatenated(const std::vector<at::Tensor>& parts) {
  int64_t width = 0;
  for (const at::Tensor& part : parts) width += part.dim() >= 1 ? part.size(-1) : 0;
  TORCH_CHECK(!parts.empty() && width == options_.in_features(), "Dense: expected parts whose last dimensions add up to ",
              options_.in_features(), " features, got ", parts.size(), " parts with ", width);
  const at::Tensor weight = weight_in_use();
  at::Tensor out;
  int64_t offset = 0;
  for (const at::Tensor& part : parts) {
    const at::Tensor columns = weight.narrow(1, offset, part.size(-1));
    offset += part.size(-1);
    out = out.defined() ? out + at::linear(part, columns) : at::linear(part, columns, linear->bias);
  }
  return qat_enabled() ? output_quant(out) : out;
}

at::Tensor DenseImpl::weight_in_use() const {
  return qat_enabled() && !weight_prequantized_ ? quant::fake_quantize_weight(linear->weight, weight_bits_)
                                                : linear->weight;
}

void DenseImpl::enable_qat(const quant::QatSettings& settings) {
  if (qat_enabled()) return;
  weight_bits_ = settings.weight_bits;
  output_quant = register_module(
      "output_quant", quant::ActivationFakeQuant(settings.observer_options()));
}

}  // namespace qtft::model
