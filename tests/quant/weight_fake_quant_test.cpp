#include "qtft/quant/detail/weight_fake_quant.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/_unique.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "qtft/common/error.h"
#include "qtft/quant/quant_params.h"

namespace qtft::quant {
namespace {

using test::literal;

std::vector<float> values(const at::Tensor& t) {
  const at::Tensor flat = t.detach().contiguous().reshape({-1});
  return std::vector<float>(flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
}

// The plain path: scales from the scalar rule, then the reference round/clamp.
at::Tensor reference_weight(const at::Tensor& w, int64_t bits, int64_t axis) {
  const QuantRange range = weight_range(bits);
  const at::Tensor scales = symmetric_per_channel_scales(w, axis, range.qmax);
  const at::Tensor zeros = at::zeros({scales.size(0)}, at::kInt);
  return fake_quantize_per_channel_reference(w, scales, zeros, axis, range.qmin, range.qmax);
}

TEST(WeightFakeQuantTest, HandComputedEightBit) {
  // Row 0: max |w| = 1, s0 = 1/127:  1 -> 127 s0, -0.5 -> -63.5 -> -64 (half to even), 0.25 -> 31.75 -> 32.
  // Row 1: max |w| = 0.07, s1 = 0.07/127: +-0.07 -> +-127 s1, 0 -> 0.
  const at::Tensor w = literal({1, -0.5, 0.25, 0.07, 0, -0.07}, {2, 3});
  const float s0 = 1.0f / 127.0f, s1 = 0.07f / 127.0f;
  EXPECT_EQ(values(fake_quantize_weight(w, 8)),
            (std::vector<float>{127 * s0, -64 * s0, 32 * s0, 127 * s1, 0.0f, -127 * s1}));
}

TEST(WeightFakeQuantTest, HandComputedFourBitAlongAxisOne) {
  // Columns of a 2x2 matrix, -7..7: column 0 max 0.7 -> s 0.1: 0.7 -> 7, -0.26 -> -2.6 -> -3.
  // Column 1 max 1.4 -> s 0.2: 1.4 -> 7, 0.05 -> 0.25 -> 0.
  const at::Tensor w = literal({0.7, 1.4, -0.26, 0.05}, {2, 2});
  const float s0 = 0.7f / 7.0f, s1 = 1.4f / 7.0f;
  EXPECT_EQ(values(fake_quantize_weight(w, 4, 1)), (std::vector<float>{7 * s0, 7 * s1, -3 * s0, 0.0f}));
}

TEST(WeightFakeQuantTest, FourBitsUseFifteenLevels) {
  // Row 0 sweeps [-1, 1] evenly, so it hits every level of -7..7; random rows reach +-7 at
  // their largest magnitude and never go beyond.
  const at::Tensor w = at::cat({at::linspace(-1, 1, 201).view({1, 201}), at::randn({3, 201})});
  const at::Tensor out = fake_quantize_weight(w, 4);
  const at::Tensor levels = (out / symmetric_per_channel_scales(w, 0, 7).view({4, 1})).round();
  EXPECT_TRUE(at::equal(levels.abs().amax(1), at::full({4}, 7.0f)));
  EXPECT_EQ(std::get<0>(at::_unique(levels[0])).numel(), 15);
}

TEST(WeightFakeQuantTest, EqualsThePlainPathBitwise) {
  const at::Tensor w = at::randn({6, 5, 4}) * literal({1e-6, 1e-3, 0.1, 1, 10, 0}, {6, 1, 1});
  for (int64_t bits : {4, 8}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      EXPECT_TRUE(at::equal(fake_quantize_weight(w, bits, axis), reference_weight(w, bits, axis)))
          << bits << " bits, axis " << axis;
    }
  }
}

TEST(WeightFakeQuantTest, ZeroChannelStaysZero) {
  const at::Tensor w = literal({0, 0, 0, 0.5, -1, 0.25}, {2, 3});
  const at::Tensor out = fake_quantize_weight(w, 8);
  EXPECT_EQ(values(out.select(0, 0)), (std::vector<float>{0, 0, 0}));
  EXPECT_FALSE(out.isnan().any().item<bool>());
}

TEST(WeightFakeQuantTest, GradientIsStraightThrough) {
  // Symmetric scales cover every value, so nothing is clamped and the gradient is all ones.
  for (int64_t bits : {4, 8}) {
    const at::Tensor w = (at::randn({4, 7}) * 3).requires_grad_(true);
    const at::Tensor out = fake_quantize_weight(w, bits);
    EXPECT_TRUE(out.requires_grad());
    (out * 2).sum().backward();
    EXPECT_TRUE(at::equal(w.grad(), at::ones_like(w) * 2)) << bits << " bits";
  }
}

TEST(WeightFakeQuantTest, UnsupportedBitsNameTheFlag) {
  try {
    fake_quantize_weight(at::randn({2, 2}), 2);
    FAIL() << "2-bit weights were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--weight-bits"), std::string::npos);
  }
}

}  // namespace
}  // namespace qtft::quant
