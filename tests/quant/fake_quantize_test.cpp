#include "qtft/quant/detail/fake_quantize.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/fake_quantize_per_tensor_affine.h>
#include <ATen/ops/full.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <c10/core/GradMode.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "memory/bitwise.h"

namespace qtft::quant {
namespace {

using test::bitwise_equal;

struct Case {
  float scale;
  int32_t zero_point;
  int64_t qmin, qmax;
};

// Values that reach every branch: well inside the range, beyond both ends (clamped, no
// gradient), exactly on rounding ties (k + 0.5 steps, where half-to-even decides), and
// exactly on the range's ends.
at::Tensor probe_values(const Case& c) {
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor steps = at::arange(-300, 300, f32) + 0.5;  // ties, in units of scale
  const at::Tensor ties = steps * c.scale;
  const at::Tensor ends = at::full({4}, 0.0f, f32);
  ends[0] = (c.qmin - c.zero_point) * c.scale;
  ends[1] = (c.qmax - c.zero_point) * c.scale;
  ends[2] = (c.qmin - c.zero_point - 0.5f) * c.scale;
  ends[3] = (c.qmax - c.zero_point + 0.5f) * c.scale;
  return at::cat({at::randn({5000}, f32) * (200 * c.scale), ties, ends, at::rand({3000}, f32) * c.scale});
}

// Output and gradient (with an upstream gradient of mixed signs, so -0.0 shows) of both.
std::pair<at::Tensor, at::Tensor> run(bool ours, const at::Tensor& values, const Case& c) {
  const at::Tensor scale = at::full({1}, c.scale, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor zero_point = at::full({1}, c.zero_point, at::TensorOptions().dtype(at::kInt));
  const at::Tensor x = values.clone().requires_grad_(true);
  const at::Tensor out = ours ? fake_quantize_per_tensor(x, scale, zero_point, c.qmin, c.qmax)
                              : at::fake_quantize_per_tensor_affine(x, scale, zero_point, c.qmin, c.qmax);
  const at::Tensor upstream = at::arange(values.numel(), values.options()).sub(values.numel() / 2.0);
  out.backward(upstream);
  return {out.detach(), x.grad()};
}

TEST(FakeQuantizePerTensorTest, BitwiseWhatAtenGivesForOutputAndGradient) {
  const Case cases[] = {{0.02f, 3, 0, 255}, {0.0137f, 128, 0, 255}, {1.0f / 3, 0, 0, 255},
                        {0.5f, 7, 0, 15},   {3.1e-5f, 255, 0, 255}, {0.25f, 0, -128, 127}};
  for (const Case& c : cases) {
    const at::Tensor values = probe_values(c);
    const auto [aten_out, aten_grad] = run(false, values, c);
    const auto [our_out, our_grad] = run(true, values, c);
    EXPECT_TRUE(bitwise_equal(our_out, aten_out)) << "scale " << c.scale << " zero point " << c.zero_point;
    EXPECT_TRUE(bitwise_equal(our_grad, aten_grad)) << "scale " << c.scale << " zero point " << c.zero_point;
  }
}

// Large enough for several tasks (32768 elements each) and not a multiple of 8: the mask's
// bits are written per task, a byte of them never shared.
TEST(FakeQuantizePerTensorTest, BitwiseWhatAtenGivesAcrossTasks) {
  const Case c{0.02f, 3, 0, 255};
  const at::Tensor probe = probe_values(c);
  const at::Tensor values = at::cat({probe, probe, probe, probe, probe, probe, probe, probe, probe.narrow(0, 0, 3)});
  ASSERT_GT(values.numel(), 2 * 32768);
  const auto [aten_out, aten_grad] = run(false, values, c);
  const auto [our_out, our_grad] = run(true, values, c);
  EXPECT_TRUE(bitwise_equal(our_out, aten_out));
  EXPECT_TRUE(bitwise_equal(our_grad, aten_grad));
}

// A temporary, which nothing else reaches, is fake-quantized in its own memory: the same
// bits as ATen's, output and gradient, with and without gradient. A tensor the caller keeps
// is left as it was, and the result is a new one.
TEST(FakeQuantizePerTensorTest, ATemporaryIsQuantizedInItsOwnMemoryWithTheSameBits) {
  const Case c{0.02f, 3, 0, 255};
  const at::Tensor values = probe_values(c);
  const at::Tensor scale = at::full({1}, c.scale, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor zero_point = at::full({1}, c.zero_point, at::TensorOptions().dtype(at::kInt));
  const auto [aten_out, aten_grad] = run(false, values, c);

  // x * 1 is exact, forward and backward: the temporary holds x's values, x gets its gradient.
  const at::Tensor x = values.clone().requires_grad_(true);
  const at::Tensor out = fake_quantize_per_tensor(x.mul(1.0), scale, zero_point, c.qmin, c.qmax);
  EXPECT_GT(out._version(), 0) << "written in place";
  out.backward(at::arange(values.numel(), values.options()).sub(values.numel() / 2.0));
  EXPECT_TRUE(bitwise_equal(out.detach(), aten_out));
  EXPECT_TRUE(bitwise_equal(x.grad(), aten_grad));

  c10::NoGradGuard no_grad;
  at::Tensor temporary = values.clone();
  const void* memory = temporary.data_ptr();
  const at::Tensor moved = fake_quantize_per_tensor(std::move(temporary), scale, zero_point, c.qmin, c.qmax);
  EXPECT_EQ(moved.data_ptr(), memory);
  EXPECT_TRUE(bitwise_equal(moved, aten_out));

  const at::Tensor kept = values.clone();
  const at::Tensor result = fake_quantize_per_tensor(kept, scale, zero_point, c.qmin, c.qmax);
  EXPECT_NE(result.data_ptr(), kept.data_ptr());
  EXPECT_TRUE(bitwise_equal(kept, values));
  EXPECT_TRUE(bitwise_equal(result, aten_out));
}

TEST(FakeQuantizePerTensorTest, WithoutGradientAndOnAStridedInputTheSameBits) {
  // The inference path writes no mask; a transposed input is read in its own order. Values
  // of magnitude 2^22 and more in units of scale take the path that skips rounding.
  const Case c{0.02f, 3, 0, 255};
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor big = at::full({3}, 0.0f, f32);
  big[0] = 4194304.5f * c.scale;
  big[1] = -8388609.0f * c.scale;
  big[2] = 1e30f;
  const at::Tensor values = at::cat({probe_values(c), big});
  const at::Tensor scale = at::full({1}, c.scale, f32);
  const at::Tensor zero_point = at::full({1}, c.zero_point, at::TensorOptions().dtype(at::kInt));
  c10::NoGradGuard no_grad;
  EXPECT_TRUE(bitwise_equal(fake_quantize_per_tensor(values, scale, zero_point, c.qmin, c.qmax),
                            at::fake_quantize_per_tensor_affine(values, scale, zero_point, c.qmin, c.qmax)));
  const at::Tensor strided = values.narrow(0, 0, 6000).view({100, 60}).t();
  ASSERT_FALSE(strided.is_contiguous());
  EXPECT_TRUE(bitwise_equal(fake_quantize_per_tensor(strided, scale, zero_point, c.qmin, c.qmax),
                            at::fake_quantize_per_tensor_affine(strided, scale, zero_point, c.qmin, c.qmax)));
}

TEST(FakeQuantizePerTensorTest, InfinitiesLandOnTheEndsAndNaNStays) {
  // Where ATen's kernel casts to int64 (undefined for these), the range's ends and NaN.
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  const at::Tensor x = at::full({3}, 0.0f, f32);
  x[0] = std::numeric_limits<float>::infinity();
  x[1] = -std::numeric_limits<float>::infinity();
  x[2] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor out = fake_quantize_per_tensor(x, at::full({1}, 0.5f, f32),
                                                  at::full({1}, 2, at::TensorOptions().dtype(at::kInt)), 0, 10);
  EXPECT_EQ(out[0].item<float>(), 4.0f);   // (10 - 2) * 0.5
  EXPECT_EQ(out[1].item<float>(), -1.0f);  // (0 - 2) * 0.5
  EXPECT_TRUE(std::isnan(out[2].item<float>()));
}

TEST(FakeQuantizePerTensorTest, ClampedValuesGetNoGradientAndLandOnTheEnds) {
  const at::Tensor x = at::arange(-4, 5, at::TensorOptions().dtype(at::kFloat)).requires_grad_(true);
  const at::Tensor scale = at::full({1}, 1.0f, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor zero_point = at::full({1}, 2, at::TensorOptions().dtype(at::kInt));
  // q = x + 2 in [0, 4]: x in [-2, 2] passes, the rest clamps to -2 or 2.
  const at::Tensor out = fake_quantize_per_tensor(x, scale, zero_point, 0, 4);
  out.sum().backward();
  const float expected_out[] = {-2, -2, -2, -1, 0, 1, 2, 2, 2};
  const float expected_grad[] = {0, 0, 1, 1, 1, 1, 1, 0, 0};
  for (int64_t i = 0; i < 9; ++i) {
    EXPECT_EQ(out[i].item<float>(), expected_out[i]) << i;
    EXPECT_EQ(x.grad()[i].item<float>(), expected_grad[i]) << i;
  }
}

}  // namespace
}  // namespace qtft::quant
