#include "qtft/quant/detail/fake_quantize.h"

#include <ATen/ops/clamp.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/fake_quantize_per_tensor_affine.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/reciprocal.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace qtft::quant {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ATen's kernel computes, per element, q = zero_point + nearbyint(x * (1 / scale)), the mask
// qmin <= q <= qmax, and (clamp(q, qmin, qmax) - zero_point) * scale. The same steps here,
// in float: q and zero_point are integers far below 2^24, so every sum is exact, and
// round() rounds half to even as nearbyint does. clamp(q) == q is the mask without two
// more comparisons (x is finite: NaN would fail both).
//
// q before clamping: zero_point + nearbyint(x * (1 / scale)).
at::Tensor unclamped_codes(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& zero_point) {
  at::Tensor q = at::mul(x, at::reciprocal(scale));
  return q.round_().add_(zero_point);
}

// (codes - zero_point) * scale, in place.
at::Tensor dequantize_(at::Tensor& codes, const at::Tensor& scale, const at::Tensor& zero_point) {
  return codes.sub_(zero_point).mul_(scale);
}

class FakeQuantizePerTensor : public torch::autograd::Function<FakeQuantizePerTensor> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& scale,
                            const at::Tensor& zero_point, int64_t qmin, int64_t qmax) {
    const at::Tensor q = unclamped_codes(x, scale, zero_point);
    at::Tensor out = at::clamp(q, static_cast<double>(qmin), static_cast<double>(qmax));
    ctx->save_for_backward({at::eq(out, q)});
    return dequantize_(out, scale, zero_point);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor mask = ctx->get_saved_variables()[0];
    // As ATen's backward (dY * mask); nothing for scale, zero point, qmin and qmax.
    return {at::mul(grad_outputs[0], mask), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor fake_quantize_per_tensor(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& zero_point,
                                    int64_t qmin, int64_t qmax) {
  if (!x.is_cpu() || x.scalar_type() != at::kFloat) {
    return at::fake_quantize_per_tensor_affine(x, scale, zero_point, qmin, qmax);
  }
  if (!c10::GradMode::is_enabled()) {
    // The same arithmetic without the mask, which only the backward pass reads, and without
    // the autograd function around it: inference at batch 1 is mostly per-op overhead.
    at::Tensor q = unclamped_codes(x, scale, zero_point).clamp_(static_cast<double>(qmin), static_cast<double>(qmax));
    return dequantize_(q, scale, zero_point);
  }
  return FakeQuantizePerTensor::apply(x, scale, zero_point, qmin, qmax);
}

}  // namespace qtft::quant
