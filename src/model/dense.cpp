#include "qtft/model/dense.h"

#include <ATen/ops/addmm.h>
#include <ATen/ops/linear.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <utility>
#include <vector>

#include "qtft/quant/detail/weight_fake_quant.h"

namespace qtft::model {

DenseImpl::DenseImpl(DenseOptions options) : options_(options) {
  linear = register_module(
      "linear",
      torch::nn::Linear(torch::nn::LinearOptions(options.in_features(), options.out_features()).bias(options.bias())));
}

at::Tensor DenseImpl::forward(const at::Tensor& x) {
  // Checked here because the matmul's own message names neither layer nor expected size.
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.in_features(), "Dense: expected input with ",
              options_.in_features(), " features in the last dimension, got shape ", x.sizes());
  if (!qat_enabled()) return linear(x);
  if (integer_product_ && !is_training() && !c10::GradMode::is_enabled()) {
    return output_quant(integer_product_->forward(x));
  }
  const at::Tensor weight = weight_in_use();
  const at::Tensor& bias = linear->bias;
  if (!bias.defined() || x.dim() < 2 || !x.is_contiguous()) return output_quant(at::linear(x, weight, bias));
  // The ops at::linear runs for this input (one addmm over the rows, then a view back to
  // x's leading dimensions), with the observer between them: the product's fresh 2-D
  // output is then the observer's alone, and is fake-quantized in its own memory
  // (quant::fake_quantize_per_tensor). linear's own output is a view, which does not qualify.
  if (x.dim() == 2) return output_quant(at::addmm(bias, x, weight.t()));
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return output_quant(at::addmm(bias, x.reshape({-1, x.size(-1)}), weight.t())).view(sizes);
}

at::Tensor DenseImpl::forward_concatenated(const std::vector<at::Tensor>& parts) {
  int64_t width = 0;
  for (const at::Tensor& part : parts) width += part.dim() >= 1 ? part.size(-1) : 0;
  TORCH_CHECK(!parts.empty() && width == options_.in_features(),
              "Dense: expected parts whose last dimensions add up to ", options_.in_features(), " features, got ",
              parts.size(), " parts with ", width);
  // The weight's columns for each part as one split: its backward assembles the weight's
  // gradient in one pass, where a narrow per part filled a zeroed weight-sized gradient
  // per part (at 220 inputs of width 160, half of a training step).
  std::vector<int64_t> widths;
  widths.reserve(parts.size());
  for (const at::Tensor& part : parts) widths.push_back(part.size(-1));
  const std::vector<at::Tensor> weight_columns = weight_in_use().split_with_sizes(widths, 1);
  at::Tensor out;
  for (size_t p = 0; p < parts.size(); ++p) {
    const at::Tensor& part = parts[p];
    const at::Tensor& columns = weight_columns[p];
    if (!out.defined()) {
      out = at::linear(part, columns, linear->bias);
      continue;
    }
    // Each further part's product accumulates in the matrix product itself (addmm with
    // beta 1) instead of in an addition of its own, a pass over the output per part.
    const std::vector<int64_t> sizes = out.sizes().vec();
    out = at::addmm(out.reshape({-1, sizes.back()}), part.reshape({-1, part.size(-1)}), columns.t()).view(sizes);
  }
  return qat_enabled() ? output_quant(std::move(out)) : out;
}

at::Tensor DenseImpl::weight_in_use() const {
  return qat_enabled() && !weight_prequantized_ ? quant::fake_quantize_weight(linear->weight, weight_bits_)
                                                : linear->weight;
}

bool DenseImpl::use_integer_product(const quant::QuantizedWeight& weight, const quant::ActivationFakeQuantImpl& input) {
  TORCH_CHECK(qat_enabled() && weight_prequantized_,
              "Dense: integer products need the prequantized weights of an int8 file");
  TORCH_CHECK(weight.values.sizes() == linear->weight.sizes(), "Dense: integer weight of shape ", weight.values.sizes(),
              " for a layer of shape ", linear->weight.sizes());
  const int64_t input_qmax = input.range().qmax;
  if (!quant::Int8Linear::saturation_free(weight.values, input_qmax)) return false;
  integer_product_ = std::make_shared<const quant::Int8Linear>(weight, linear->bias, input.qparams(), input_qmax);
  return true;
}

IntegerProductCount use_integer_product(DenseImpl& dense, const IntegerWeights& weights,
                                        const quant::ActivationFakeQuantImpl& input) {
  return {1, dense.use_integer_product(weights(dense), input) ? 1 : 0};
}

void DenseImpl::enable_qat(const quant::QatSettings& settings) {
  if (qat_enabled()) return;
  weight_bits_ = settings.weight_bits;
  output_quant = register_module("output_quant", quant::ActivationFakeQuant(settings.observer_options()));
}

}  // namespace qtft::model
