#include "qtft/quant/quant_params.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/fake_quantize_per_channel_affine.h>
#include <ATen/ops/fake_quantize_per_tensor_affine.h>
#include <ATen/ops/full.h>
#include <ATen/ops/fused_moving_avg_obs_fake_quant.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "model/model_test_util.h"
#include "qtft/common/error.h"

namespace qtft::quant {
namespace {

using test::literal;

// A 1-D float tensor of the given values.
at::Tensor vec(std::initializer_list<double> v) { return literal(v, {static_cast<int64_t>(v.size())}); }

// The scale and zero point ATen's fused op stores for a given running [min, max]: the
// observer is off, so the op only chooses parameters (and fake-quantizes a dummy input).
QParams aten_qparams(float min, float max, int64_t qmin, int64_t qmax) {
  at::Tensor running_min = at::full({1}, min);
  at::Tensor running_max = at::full({1}, max);
  at::Tensor scale = at::ones({1});
  at::Tensor zero_point = at::zeros({1}, at::kInt);
  const at::Tensor off = at::zeros({1}, at::kLong);
  const at::Tensor on = at::ones({1}, at::kLong);
  at::fused_moving_avg_obs_fake_quant(at::zeros({1}), off, on, running_min, running_max, scale, zero_point, 0.01, qmin,
                                      qmax, 0, false, false);
  return {static_cast<double>(scale.item<float>()), static_cast<int64_t>(zero_point.item<int32_t>())};
}

std::vector<float> values(const at::Tensor& t) {
  const at::Tensor flat = t.detach().contiguous().reshape({-1});
  return std::vector<float>(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

// Bitwise equality with a readable first difference (at::equal says only "false").
void expect_bitwise_equal(const at::Tensor& actual, const at::Tensor& expected) {
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const std::vector<float> a = values(actual), e = values(expected);
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != e[i]) {
      ADD_FAILURE() << "element " << i << ": " << a[i] << " vs " << e[i];
      return;
    }
  }
}

std::string usage_error_message(int64_t bits, QuantRange (*range)(int64_t)) {
  try {
    range(bits);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(QuantParamsTest, RangesForSupportedBits) {
  EXPECT_EQ(activation_range(8).qmin, 0);
  EXPECT_EQ(activation_range(8).qmax, 255);
  EXPECT_EQ(activation_range(7).qmin, 0);
  EXPECT_EQ(activation_range(7).qmax, 127);
  EXPECT_EQ(weight_range(8).qmin, -127);
  EXPECT_EQ(weight_range(8).qmax, 127);
  EXPECT_EQ(weight_range(4).qmin, -7);
  EXPECT_EQ(weight_range(4).qmax, 7);
}

TEST(QuantParamsTest, UnsupportedBitsNameTheFlag) {
  EXPECT_NE(usage_error_message(4, activation_range).find("--activation-bits"), std::string::npos);
  EXPECT_NE(usage_error_message(6, activation_range).find("--activation-bits"), std::string::npos);
  EXPECT_NE(usage_error_message(16, activation_range).find("--activation-bits"), std::string::npos);
  EXPECT_NE(usage_error_message(2, weight_range).find("--weight-bits"), std::string::npos);
  EXPECT_NE(usage_error_message(16, weight_range).find("--weight-bits"), std::string::npos);
}

TEST(QuantParamsTest, HandComputedAffineParams) {
  // min -1, max 3 on 0..255: scale = 4 / 255; zero point = nearbyint(0 - (-1) / (4/255))
  // = nearbyint(63.75) = 64.
  const QParams p = affine_qparams(-1.0f, 3.0f, 0, 255);
  EXPECT_EQ(p.scale, static_cast<double>(static_cast<float>(4.0 / 255.0)));
  EXPECT_EQ(p.zero_point, 64);
}

TEST(QuantParamsTest, RangeIsExtendedToIncludeZero) {
  // [1, 2] becomes [0, 2]: scale 2/255, zero point 0. [-2, -1] becomes [-2, 0]: zero point 255.
  const QParams positive = affine_qparams(1.0f, 2.0f, 0, 255);
  EXPECT_EQ(positive.scale, static_cast<double>(static_cast<float>(2.0 / 255.0)));
  EXPECT_EQ(positive.zero_point, 0);
  const QParams negative = affine_qparams(-2.0f, -1.0f, 0, 255);
  EXPECT_EQ(negative.scale, static_cast<double>(static_cast<float>(2.0 / 255.0)));
  EXPECT_EQ(negative.zero_point, 255);
}

TEST(QuantParamsTest, ZeroIsExactlyRepresentable) {
  const std::vector<std::pair<float, float>> ranges = {{-1, 3},       {1, 2},          {-2, -1},
                                                       {-0.3f, 7.1f}, {-1e-9f, 1e-9f}, {0, 0}};
  for (const auto& [min, max] : ranges) {
    const QParams p = affine_qparams(min, max, 0, 255);
    const at::Tensor zero = at::zeros({1});
    EXPECT_EQ(fake_quantize_reference(zero, p.scale, p.zero_point, 0, 255).item<float>(), 0.0f) << min << ", " << max;
  }
}

TEST(QuantParamsTest, EmptyAndTinyRangesUseTheMinimumScale) {
  // min == max == 0: ATen's arbitrary 0.1 (nothing to resolve).
  const QParams empty = affine_qparams(0.0f, 0.0f, 0, 255);
  EXPECT_EQ(empty.scale, static_cast<double>(0.1f));
  EXPECT_EQ(empty.zero_point, 0);
  // [0, 1e-6]: 1e-6 / 255 is below 6.1e-5, so the scale is the minimum (not float epsilon).
  const QParams tiny = affine_qparams(0.0f, 1e-6f, 0, 255);
  EXPECT_EQ(tiny.scale, static_cast<double>(kMinScale));
  EXPECT_EQ(tiny.zero_point, 0);
  // [-1e-9, 1e-9]: stretched to the minimum scale around the same zero point, 127.5, which
  // rounds half to even: 128.
  const QParams centred = affine_qparams(-1e-9f, 1e-9f, 0, 255);
  EXPECT_EQ(centred.scale, static_cast<double>(kMinScale));
  EXPECT_EQ(centred.zero_point, 128);
}

TEST(QuantParamsTest, ZeroPointRoundsHalfToEven) {
  // Scale 1 in each case; the exact zero points 0.5, 1.5 and 2.5 round to 0, 2 and 2.
  EXPECT_EQ(affine_qparams(-0.5f, 254.5f, 0, 255).zero_point, 0);
  EXPECT_EQ(affine_qparams(-1.5f, 253.5f, 0, 255).zero_point, 2);
  EXPECT_EQ(affine_qparams(-2.5f, 252.5f, 0, 255).zero_point, 2);
  EXPECT_EQ(affine_qparams(-2.5f, 252.5f, 0, 255).scale, 1.0);
}

TEST(QuantParamsTest, AffineParamsEqualAtenBitwise) {
  // Wide, narrow, one-sided and sub-minimum ranges on several grids.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0), exponent(-12.0, 3.0);
  const std::vector<QuantRange> grids = {{0, 255}, {-128, 127}, {-127, 127}, {-7, 7}, {0, 15}};
  for (int i = 0; i < 3000; ++i) {
    const double magnitude = std::pow(10.0, exponent(rng));
    float a = static_cast<float>(unit(rng) * magnitude), b = static_cast<float>(unit(rng) * magnitude);
    if (i % 5 == 0) a = 0.0f;
    if (i % 7 == 0) b = -std::abs(b), a = 0.0f;
    const float min = std::min(a, b), max = std::max(a, b);
    const QuantRange g = grids[static_cast<size_t>(i) % grids.size()];
    const QParams expected = aten_qparams(min, max, g.qmin, g.qmax);
    const QParams actual = affine_qparams(min, max, g.qmin, g.qmax);
    ASSERT_EQ(actual.scale, expected.scale) << "[" << min << ", " << max << "] on " << g.qmin << ".." << g.qmax;
    ASSERT_EQ(actual.zero_point, expected.zero_point)
        << "[" << min << ", " << max << "] on " << g.qmin << ".." << g.qmax;
  }
}

TEST(QuantParamsTest, SymmetricParams) {
  // 1.27 / 127 in float, zero point 0; an all-zero channel gets the minimum scale.
  const QParams p = symmetric_qparams(1.27f, 127);
  EXPECT_EQ(p.scale, static_cast<double>(1.27f / 127.0f));
  EXPECT_EQ(p.zero_point, 0);
  EXPECT_EQ(symmetric_qparams(0.0f, 127).scale, static_cast<double>(kMinScale));
  EXPECT_EQ(symmetric_qparams(0.7f, 7).scale, static_cast<double>(0.7f / 7.0f));
}

TEST(QuantParamsTest, PerChannelScalesFollowTheScalarRule) {
  const at::Tensor w = at::randn({5, 3, 4}) * literal({1e-6, 1e-3, 0.1, 1, 0}, {5, 1, 1});
  for (int64_t axis : {0, 1, 2, -1}) {
    const at::Tensor scales = symmetric_per_channel_scales(w, axis, 127);
    const int64_t dim = axis < 0 ? axis + w.dim() : axis;
    ASSERT_EQ(scales.sizes(), at::IntArrayRef({w.size(dim)}));
    for (int64_t c = 0; c < w.size(dim); ++c) {
      const float abs_max = w.select(dim, c).abs().max().item<float>();
      EXPECT_EQ(scales[c].item<float>(), static_cast<float>(symmetric_qparams(abs_max, 127).scale))
          << "axis " << axis << " channel " << c;
    }
  }
  // A vector: every element is its own channel.
  const at::Tensor v = vec({-0.5, 2.54, 0});
  EXPECT_EQ(values(symmetric_per_channel_scales(v, 0, 127)),
            (std::vector<float>{0.5f / 127.0f, 2.54f / 127.0f, kMinScale}));
}

TEST(QuantReferenceTest, HandComputedValues) {
  // scale s = 4/255, zero point 64 on 0..255 (the [-1, 3] parameters above):
  //   -1   -> round(-63.75) = -64 -> q = 0           -> (0 - 64) s   = -1.00392
  //    3   -> round(191.25) = 191 -> q = 255         -> 191 s        =  2.99608
  //    0   -> q = 64                                 -> 0 exactly
  //    5   -> round(318.75) = 319 -> 383, clamped to 255 -> 191 s    (mask 0)
  //   -2   -> round(-127.5) + 64 < 0, clamped to 0   -> -64 s        (mask 0)
  //    0.01 -> round(0.6375) = 1 -> q = 65           -> s
  const float s = static_cast<float>(4.0 / 255.0);
  const at::Tensor x = vec({-1, 3, 0, 5, -2, 0.01});
  EXPECT_EQ(values(fake_quantize_reference(x, s, 64, 0, 255)),
            (std::vector<float>{-64 * s, 191 * s, 0.0f, 191 * s, -64 * s, s}));
  EXPECT_EQ(values(fake_quantize_reference_mask(x, s, 64, 0, 255)), (std::vector<float>{1, 1, 1, 0, 0, 1}));
}

TEST(QuantReferenceTest, FourBitWeightGrid) {
  // Symmetric 4-bit, scale 0.1: everything lands on -7..7 steps; 1 and -0.9 clamp to +-7.
  const float s = 0.1f;
  const at::Tensor x = vec({0.3, -0.1, 0.04, 1.0, -0.9, 0.0});
  EXPECT_EQ(values(fake_quantize_reference(x, s, 0, -7, 7)),
            (std::vector<float>{3 * s, -1 * s, 0.0f, 7 * s, -7 * s, 0.0f}));
  EXPECT_EQ(values(fake_quantize_reference_mask(x, s, 0, -7, 7)), (std::vector<float>{1, 1, 1, 0, 0, 1}));
}

TEST(QuantReferenceTest, MultipliesByTheReciprocalLikeAten) {
  // 1.55f / 0.1f = 15.499999 (rounds to 15), 1.55f * (1 / 0.1f) = 15.5 (rounds to even, 16):
  // ATen multiplies, and so must the reference to stay bitwise equal.
  const at::Tensor x = vec({1.55});
  EXPECT_EQ(at::fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127).item<float>(), 16 * 0.1f);
  EXPECT_EQ(fake_quantize_reference(x, 0.1, 0, -128, 127).item<float>(), 16 * 0.1f);
  EXPECT_EQ(std::nearbyint(1.55f / 0.1f), 15.0f);
}

TEST(QuantReferenceTest, PerTensorEqualsAtenBitwise) {
  for (const auto& [min, max] : std::vector<std::pair<float, float>>{{-1, 3}, {0, 6}, {-0.02f, 0.01f}, {-5, -1}}) {
    const QParams p = affine_qparams(min, max, 0, 255);
    const auto s = static_cast<float>(p.scale);
    // Random values beyond the range, plus exact ties k + 1/2 on the grid.
    const at::Tensor ties = (at::arange(-300, 300, at::kFloat) + 0.5) * s;
    const at::Tensor x = at::cat({at::randn({4000}) * (max - min), ties});
    const at::Tensor aten_double = at::fake_quantize_per_tensor_affine(x, p.scale, p.zero_point, 0, 255);
    const at::Tensor aten_tensor =
        at::fake_quantize_per_tensor_affine(x, at::full({1}, s), at::full({1}, p.zero_point, at::kInt), 0, 255);
    const at::Tensor reference = fake_quantize_reference(x, p.scale, p.zero_point, 0, 255);
    expect_bitwise_equal(aten_double, reference);
    expect_bitwise_equal(aten_tensor, reference);
  }
}

TEST(QuantReferenceTest, StraightThroughGradientIsTheMask) {
  const QParams p = affine_qparams(-1.0f, 3.0f, 0, 255);
  const auto s = static_cast<float>(p.scale);
  // In range, far outside, and at the edges: 191.4 s rounds to 191 -> q 255 (inside),
  // 191.6 s rounds to 192 -> q 256 (outside), -64.4 s -> q 0 (inside), -64.6 s -> q -1.
  at::Tensor x = at::cat({at::randn({1000}) * 4, vec({191.4 * s, 191.6 * s, -64.4 * s, -64.6 * s})});
  x.requires_grad_(true);
  at::fake_quantize_per_tensor_affine(x, p.scale, p.zero_point, 0, 255).sum().backward();
  const at::Tensor mask = fake_quantize_reference_mask(x.detach(), p.scale, p.zero_point, 0, 255);
  expect_bitwise_equal(x.grad(), mask);
  EXPECT_EQ(values(mask.slice(0, 1000)), (std::vector<float>{1, 0, 1, 0}));
  EXPECT_GT(mask.sum().item<float>(), 0.0f);
  EXPECT_LT(mask.sum().item<float>(), static_cast<float>(mask.numel()));
}

TEST(QuantReferenceTest, PerChannelEqualsAtenBitwiseOnEachAxis) {
  const at::Tensor x = at::randn({4, 6, 3}) * 2;
  for (int64_t axis : {0, 1, 2}) {
    const int64_t channels = x.size(axis);
    // Affine per channel, with zero points spread over the grid, and symmetric per channel.
    const at::Tensor scales = at::rand({channels}) * 0.05 + 0.005;
    const at::Tensor zero_points = at::randint(0, 256, {channels}, at::kInt);
    const at::Tensor xg = x.clone().requires_grad_(true);
    at::fake_quantize_per_channel_affine(xg, scales, zero_points, axis, 0, 255).sum().backward();
    expect_bitwise_equal(at::fake_quantize_per_channel_affine(x, scales, zero_points, axis, 0, 255),
                         fake_quantize_per_channel_reference(x, scales, zero_points, axis, 0, 255));
    expect_bitwise_equal(xg.grad(), fake_quantize_per_channel_reference_mask(x, scales, zero_points, axis, 0, 255));

    const at::Tensor sym = symmetric_per_channel_scales(x, axis, 7);
    const at::Tensor zeros = at::zeros({channels}, at::kInt);
    expect_bitwise_equal(at::fake_quantize_per_channel_affine(x, sym, zeros, axis, -7, 7),
                         fake_quantize_per_channel_reference(x, sym, zeros, axis, -7, 7));
  }
}

TEST(QuantReferenceTest, PerChannelHandComputed) {
  // Axis 1 of a 2x2 matrix: column 0 has scale 0.5, zero point 0; column 1 scale 0.25,
  // zero point 2 on 0..7. [[1.2, 0.3], [-0.4, 2]]:
  //   1.2 / 0.5 = 2.4 -> 2 -> 1.0;  -0.4 / 0.5 = -0.8 -> -1, clamped to 0 -> 0 (mask 0)
  //   0.3 / 0.25 = 1.2 -> 1 + 2 = 3 -> (3 - 2) 0.25 = 0.25;  2 / 0.25 = 8 + 2 = 10 -> 7 -> 1.25 (mask 0)
  const at::Tensor x = literal({1.2, 0.3, -0.4, 2}, {2, 2});
  const at::Tensor scales = vec({0.5, 0.25});
  const at::Tensor zero_points = at::tensor(std::vector<int32_t>{0, 2});
  EXPECT_EQ(values(fake_quantize_per_channel_reference(x, scales, zero_points, 1, 0, 7)),
            (std::vector<float>{1.0f, 0.25f, 0.0f, 1.25f}));
  EXPECT_EQ(values(fake_quantize_per_channel_reference_mask(x, scales, zero_points, 1, 0, 7)),
            (std::vector<float>{1, 1, 0, 0}));
  expect_bitwise_equal(at::fake_quantize_per_channel_affine(x, scales, zero_points, 1, 0, 7),
                       fake_quantize_per_channel_reference(x, scales, zero_points, 1, 0, 7));
}

}  // namespace
}  // namespace qtft::quant
