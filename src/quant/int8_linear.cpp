#include "qtft/quant/int8_linear.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/quantized/PackedParams.h>
#include <ATen/ops/_make_per_channel_quantized_tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <optional>

#include "qtft/common/error.h"

namespace qtft::quant {
namespace {

using PackedParams = c10::intrusive_ptr<LinearPackedParamsBase>;

// Keeps ATen's deprecation notice for quantized tensors (pytorch#184982) off the caller's
// stderr: the adapter is where that deprecation is handled. The handler is thread-local and
// restored on scope exit.
class QuietWarnings : public c10::WarningHandler {
 public:
  void process(const c10::Warning& /*warning*/) override {}
};

PackedParams prepack(const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("quantized::linear_prepack", "")
                             .typed<PackedParams(at::Tensor, std::optional<at::Tensor>)>();
  return op.call(weight, bias);
}

}  // namespace

struct Int8Linear::Packed {
  PackedParams params;
};

std::string Int8Linear::unavailable_reason() {
  const at::QEngine engine = at::globalContext().qEngine();
  if (engine == at::QEngine::FBGEMM || engine == at::QEngine::X86) return {};
  return "the quantized engine is " + std::string(c10::toString(engine)) + ", not x86 or fbgemm";
}

bool Int8Linear::saturation_free(const at::Tensor& values, int64_t input_qmax) {
  TORCH_CHECK(values.dim() == 2, "Int8Linear: expected 2-D weight values, got shape ", values.sizes());
  at::Tensor w = values.to(at::kLong);
  if (w.size(1) % 2 != 0) w = at::cat({w, at::zeros({w.size(0), 1}, w.options())}, 1);
  const at::Tensor positive = at::clamp_min(w, 0);
  const at::Tensor negative = at::clamp_min(-w, 0);
  auto pair_sum = [](const at::Tensor& t) { return t.slice(1, 0, t.size(1), 2) + t.slice(1, 1, t.size(1), 2); };
  const int64_t largest_positive = w.numel() == 0 ? 0 : pair_sum(positive).max().item<int64_t>();
  const int64_t largest_negative = w.numel() == 0 ? 0 : pair_sum(negative).max().item<int64_t>();
  return input_qmax * largest_positive <= 32767 && input_qmax * largest_negative <= 32768;
}

Int8Linear::Int8Linear(const QuantizedWeight& weight, const at::Tensor& bias, QParams input, int64_t input_qmax)
    : input_(input) {
  if (const std::string reason = unavailable_reason(); !reason.empty()) throw Error("integer products: " + reason);
  const at::Tensor& values = weight.values;
  if (values.dim() != 2 || values.scalar_type() != at::kChar || weight.scales.dim() != 1 ||
      weight.scales.size(0) != values.size(0) ||
      (bias.defined() && (bias.dim() != 1 || bias.size(0) != values.size(0)))) {
    throw Error("integer products: expected int8 values [rows, cols], scales [rows] and a bias [rows], got values " +
                std::string(c10::toString(values.scalar_type())) + " of " + std::to_string(values.dim()) +
                " dimensions");
  }
  if (input_qmax < 1 || input_qmax > 255 || input.zero_point < 0 || input.zero_point > input_qmax) {
    throw Error("integer products: input codes must lie in 0..255, got 0.." + std::to_string(input_qmax) +
                " with zero point " + std::to_string(input.zero_point));
  }
  rows_ = values.size(0);
  cols_ = values.size(1);
  QuietWarnings quiet;
  c10::WarningUtils::WarningHandlerGuard guard(&quiet);
  const at::Tensor quantized = at::_make_per_channel_quantized_tensor(
      values.contiguous(), weight.scales.to(at::kDouble), at::zeros({rows_}, values.options().dtype(at::kLong)), 0);
  std::optional<at::Tensor> b;
  if (bias.defined()) b = bias.detach().to(at::kFloat).contiguous();
  packed_ = std::make_shared<const Packed>(Packed{prepack(quantized, b)});
}

at::Tensor Int8Linear::forward(const at::Tensor& x) const {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == cols_ && x.scalar_type() == at::kFloat && x.device().is_cpu(),
              "Int8Linear: expected a float CPU input with ", cols_, " features in the last dimension, got ",
              x.scalar_type(), " ", x.sizes(), " on ", x.device());
  auto out_sizes = x.sizes().vec();
  out_sizes.back() = rows_;
  const at::Tensor flat = x.reshape({-1, cols_}).contiguous();
  return packed_->params->apply_with_input_q_dq_qweight_dq_output_fp32(flat, input_.scale, input_.zero_point)
      .view(out_sizes);
}

}  // namespace qtft::quant
