#include "qtft/quant/quant_params.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/round.h>
#include <c10/core/GradMode.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qtft/common/error.h"

namespace qtft::quant {
namespace {

// The shape that lines a per-channel vector up with x along axis: [1, .., C, .., 1].
std::vector<int64_t> channel_shape(const at::Tensor& x, int64_t axis) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[static_cast<size_t>(axis)] = x.size(axis);
  return shape;
}

// q = nearbyint(x * (1 / scale)) + zero_point before clamping, as float: the value both the
// output and the gradient mask are computed from. scale and zero_point broadcast against x.
at::Tensor rounded_per_channel(const at::Tensor& x, const at::Tensor& scales, const at::Tensor& zero_points,
                               int64_t axis, int64_t qmin, int64_t qmax) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "fake_quantize_per_channel_reference: expected a float32 tensor, got ",
              x.scalar_type());
  TORCH_CHECK(qmin < qmax, "fake_quantize_per_channel_reference: expected qmin < qmax, got ", qmin, " and ", qmax);
  TORCH_CHECK(axis >= 0 && axis < x.dim(), "fake_quantize_per_channel_reference: axis ", axis,
              " out of range for a tensor of ", x.dim(), " dimensions");
  TORCH_CHECK(scales.dim() == 1 && scales.numel() == x.size(axis) && zero_points.numel() == x.size(axis),
              "fake_quantize_per_channel_reference: expected ", x.size(axis), " scales and zero points, got ",
              scales.numel(), " and ", zero_points.numel());
  const std::vector<int64_t> shape = channel_shape(x, axis);
  // The reciprocal is a correctly rounded float division, the same 1.0f / scale ATen's kernel
  // computes per element.
  const at::Tensor inv_scale = at::reciprocal(scales.to(at::kFloat)).view(shape);
  return at::round(x * inv_scale) + zero_points.to(at::kFloat).view(shape);
}

}  // namespace

QuantRange activation_range(int64_t bits) {
  if (bits != 7 && bits != 8) throw UsageError("--activation-bits must be 7 or 8, got " + std::to_string(bits));
  return {0, (int64_t{1} << bits) - 1};
}

QuantRange weight_range(int64_t bits) {
  if (bits != 4 && bits != 8) throw UsageError("--weight-bits must be 4 or 8, got " + std::to_string(bits));
  const int64_t half = (int64_t{1} << (bits - 1)) - 1;
  return {-half, half};
}

QParams affine_qparams(float min, float max, int64_t qmin, int64_t qmax) {
  // NaN fails this comparison too, as it should.
  TORCH_CHECK(min <= max, "affine_qparams: expected min <= max, got ", min, " and ", max);
  TORCH_CHECK(qmin < qmax, "affine_qparams: expected qmin < qmax, got ", qmin, " and ", qmax);

  // Each step restates ATen's CPU ChooseQuantizationParams, including where it rounds to float,
  // so that the result is bitwise what fused_moving_avg_obs_fake_quant stores.
  min = std::min(min, 0.0f);
  max = std::max(max, 0.0f);
  const auto levels = static_cast<int32_t>(qmax - qmin);
  double scale = (static_cast<double>(max) - min) / levels;
  if (static_cast<float>(scale) == 0.0f || std::isinf(1.0f / static_cast<float>(scale))) scale = kEmptyRangeScale;

  if (scale < kMinScale) {
    const auto original = static_cast<float>(scale);
    scale = kMinScale;
    // Stretch the range to the new scale so the zero point computed below stays put.
    if (min == 0.0f) {
      max = kMinScale * static_cast<float>(levels);
    } else if (max == 0.0f) {
      min = -kMinScale * static_cast<float>(levels);
    } else {
      const float amplifier = kMinScale / original;
      min *= amplifier;
      max *= amplifier;
    }
  }

  const double qmin_d = static_cast<double>(qmin);
  const double qmax_d = static_cast<double>(qmax);
  const double from_min = qmin_d - min / scale;
  const double from_max = qmax_d - max / scale;
  const double error_min = std::abs(qmin_d) - std::abs(min / scale);
  const double error_max = std::abs(qmax_d) - std::abs(max / scale);
  const double initial = error_min < error_max ? from_min : from_max;

  int64_t zero_point = 0;
  if (initial < qmin_d) {
    zero_point = qmin;
  } else if (initial > qmax_d) {
    zero_point = qmax;
  } else {
    zero_point = static_cast<int64_t>(std::nearbyint(initial));
  }
  return {static_cast<double>(static_cast<float>(scale)), zero_point};
}

QParams symmetric_qparams(float abs_max, int64_t qmax) {
  TORCH_CHECK(abs_max >= 0.0f, "symmetric_qparams: expected a non-negative absolute maximum, got ", abs_max);
  TORCH_CHECK(qmax > 0, "symmetric_qparams: expected qmax > 0, got ", qmax);
  const float scale = std::max(abs_max / static_cast<float>(qmax), kMinScale);
  return {static_cast<double>(scale), 0};
}

at::Tensor symmetric_per_channel_scales(const at::Tensor& w, int64_t axis, int64_t qmax) {
  TORCH_CHECK(w.scalar_type() == at::kFloat, "symmetric_per_channel_scales: expected a float32 tensor, got ",
              w.scalar_type());
  TORCH_CHECK(w.dim() >= 1 && w.numel() > 0, "symmetric_per_channel_scales: expected a non-empty tensor, got shape ",
              w.sizes());
  TORCH_CHECK(qmax > 0, "symmetric_per_channel_scales: expected qmax > 0, got ", qmax);
  c10::NoGradGuard no_grad;
  const int64_t dim = c10::maybe_wrap_dim(axis, w.dim());
  std::vector<int64_t> other_dims;
  for (int64_t d = 0; d < w.dim(); ++d) {
    if (d != dim) other_dims.push_back(d);
  }
  // amax over an empty list would reduce every dimension, so a vector is its own maximum.
  const at::Tensor abs_w = w.detach().abs();
  const at::Tensor abs_max = other_dims.empty() ? abs_w : at::amax(abs_w, other_dims);
  // Divided by a full tensor, not a scalar: CUDA turns division by a scalar into
  // multiplication by its reciprocal, which can differ from symmetric_qparams in the last bit.
  const at::Tensor scales = abs_max / at::full_like(abs_max, static_cast<double>(qmax));
  return at::clamp_min(scales, kMinScale);
}

at::Tensor fake_quantize_reference(const at::Tensor& x, double scale, int64_t zero_point, int64_t qmin, int64_t qmax) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "fake_quantize_reference: expected a float32 tensor, got ",
              x.scalar_type());
  TORCH_CHECK(qmin < qmax, "fake_quantize_reference: expected qmin < qmax, got ", qmin, " and ", qmax);
  // ATen's kernel works in float with the float reciprocal; scalars below are exact in float.
  const auto scale_f = static_cast<float>(scale);
  const float inv_scale = 1.0f / scale_f;
  const at::Tensor q = at::round(x * inv_scale) + zero_point;
  return (at::clamp(q, qmin, qmax) - zero_point) * scale_f;
}

at::Tensor fake_quantize_reference_mask(const at::Tensor& x, double scale, int64_t zero_point, int64_t qmin,
                                        int64_t qmax) {
  TORCH_CHECK(x.scalar_type() == at::kFloat, "fake_quantize_reference_mask: expected a float32 tensor, got ",
              x.scalar_type());
  const float inv_scale = 1.0f / static_cast<float>(scale);
  const at::Tensor q = at::round(x * inv_scale) + zero_point;
  return ((q >= qmin) & (q <= qmax)).to(at::kFloat);
}

at::Tensor fake_quantize_per_channel_reference(const at::Tensor& x, const at::Tensor& scales,
                                               const at::Tensor& zero_points, int64_t axis, int64_t qmin,
                                               int64_t qmax) {
  const int64_t dim = c10::maybe_wrap_dim(axis, x.dim());
  const at::Tensor q = rounded_per_channel(x, scales, zero_points, dim, qmin, qmax);
  const std::vector<int64_t> shape = channel_shape(x, dim);
  return (at::clamp(q, qmin, qmax) - zero_points.to(at::kFloat).view(shape)) * scales.to(at::kFloat).view(shape);
}

at::Tensor fake_quantize_per_channel_reference_mask(const at::Tensor& x, const at::Tensor& scales,
                                                    const at::Tensor& zero_points, int64_t axis, int64_t qmin,
                                                    int64_t qmax) {
  const int64_t dim = c10::maybe_wrap_dim(axis, x.dim());
  const at::Tensor q = rounded_per_channel(x, scales, zero_points, dim, qmin, qmax);
  return ((q >= qmin) & (q <= qmax)).to(at::kFloat);
}

}  // namespace qtft::quant
