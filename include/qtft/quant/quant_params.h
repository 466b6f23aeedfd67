#pragma once

// Quantization parameters and a plain fake-quantization path, written with basic ATen ops.
//
// The training path uses ATen's fused fake-quant kernels (they carry the straight-through
// gradient); this file restates their arithmetic so that tests can compare the two, and so
// that qtft can move if upstream retires those ops. Every rule below was checked against
// LibTorch 2.15 on CPU (see tests/quant/quant_params_test.cpp):
//
// - Fake quantization multiplies by the float reciprocal of the scale, it does not divide:
//     q = clamp(nearbyint(x * (1.0f / scale)) + zero_point, qmin, qmax)
//     y = (q - zero_point) * scale
//   Near ties the two differ (scale 0.1f, x = 1.55f: x / s rounds to 15, x * (1 / s) to 16).
//   nearbyint rounds half to even, as at::round does.
// - The straight-through gradient is 1 where the rounded value before clamping lies in
//   [qmin, qmax] and 0 elsewhere.
// - Affine scale and zero point follow ATen's CPU ChooseQuantizationParams (used by
//   fused_moving_avg_obs_fake_quant): see affine_qparams.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace qtft::quant {

// The integer grid a tensor is quantized onto.
struct QuantRange {
  int64_t qmin;
  int64_t qmax;
};

// Activations: unsigned, 0..2^bits-1 (8 bits: 0..255, 7 bits: 0..127). 7 bits is
// PyTorch's "reduce_range" for fbgemm: on x86 CPUs without VNNI its integer products are
// exact only then (quant::Int8Linear). Anything else throws UsageError naming
// --activation-bits.
QuantRange activation_range(int64_t bits);

// Weights: signed, symmetric and narrow, -(2^(bits-1)-1)..2^(bits-1)-1 (8: -127..127,
// 4: -7..7). Narrow so that the grid is symmetric and zero point 0 is exact. 4 or 8 bits;
// anything else throws UsageError naming --weight-bits.
QuantRange weight_range(int64_t bits);

// ATen's CPU minimum scale: the smallest normal fp16 value, rounded (6.1e-5f), chosen
// upstream so that scales never fall into fp16's subnormal range. It is not
// numeric_limits<float>::epsilon() (that is the Python observers' eps). CUDA's fused
// kernel applies no minimum; qtft's reference follows the CPU rule.
inline constexpr float kMinScale = 6.1e-5f;

// The scale ATen picks when min == max == 0 (nothing to resolve; any positive scale works).
inline constexpr double kEmptyRangeScale = 0.1;

// scale is always a float32 value (ATen stores it in a float tensor); it is held as a
// double because that is what ATen's per-tensor API takes.
struct QParams {
  double scale;
  int64_t zero_point;
};

// Affine parameters for observed [min, max], exactly as ATen's fused observer on CPU:
//   1. extend [min, max] to contain 0, so that zero is exactly representable;
//   2. scale = (max - min) / (qmax - qmin), in double; 0 (or one whose float reciprocal
//      is infinite) becomes 0.1;
//   3. a scale below kMinScale becomes kMinScale, and min and max are stretched by the same
//      factor (or the non-zero end set to +-kMinScale * (qmax - qmin)) so the zero point
//      stays where it was;
//   4. zero point from whichever end has the smaller rounding error: qmin - min / scale if
//      |qmin| - |min / scale| < |qmax| - |max / scale|, else qmax - max / scale (in double,
//      with the unrounded scale); clamped to [qmin, qmax], else nearbyint (half to even).
//      for 0..255 it comes down to nearbyint(-min / scale);
//   5. the scale is then rounded to float.
// Example: min -1, max 3, 0..255: scale 4/255, zero point nearbyint(63.75) = 64.
QParams affine_qparams(float min, float max, int64_t qmin, int64_t qmax);

// Symmetric parameters for one weight channel: scale = max(abs_max / qmax, kMinScale) in
// float, zero point 0. The minimum keeps an all-zero channel's scale positive.
QParams symmetric_qparams(float abs_max, int64_t qmax);

// The same rule for every channel of w along axis, with tensor ops on w's device: a float
// tensor of w.size(axis) scales. Computed under no-grad (scales are not trained).
at::Tensor symmetric_per_channel_scales(const at::Tensor& w, int64_t axis, int64_t qmax);

// Plain per-tensor fake quantization (see the rule at the top). x must be float32.
at::Tensor fake_quantize_reference(const at::Tensor& x, double scale, int64_t zero_point, int64_t qmin, int64_t qmax);

// The straight-through gradient of fake_quantize_reference: a float tensor of 1 where the
// rounded value lies in [qmin, qmax], 0 where it was clamped.
at::Tensor fake_quantize_reference_mask(const at::Tensor& x, double scale, int64_t zero_point, int64_t qmin,
                                        int64_t qmax);

// Per-channel variants: scales (float) and zero_points (any integer dtype), one per index of
// x along axis, in the argument order of at::fake_quantize_per_channel_affine.
at::Tensor fake_quantize_per_channel_reference(const at::Tensor& x, const at::Tensor& scales,
                                               const at::Tensor& zero_points, int64_t axis, int64_t qmin, int64_t qmax);
at::Tensor fake_quantize_per_channel_reference_mask(const at::Tensor& x, const at::Tensor& scales,
                                                    const at::Tensor& zero_points, int64_t axis, int64_t qmin,
                                                    int64_t qmax);

}  // namespace qtft::quant
