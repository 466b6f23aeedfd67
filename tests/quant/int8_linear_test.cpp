// Integer products: on an observer's codes the result is the exact integer sum, scaled,
// up to float rounding; the saturation bound is the kernel's, pair by pair of columns.
#include <ATen/ops/abs.h>
#include <ATen/ops/full.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qtft/common/error.h"
#include "qtft/quant/int8_linear.h"

namespace qtft::quant {
namespace {

// The product computed exactly in double from the integers: sum_k (c_k - z) q_nk, then
// times the input and channel scales, plus the bias.
at::Tensor exact_product(const at::Tensor& codes, int64_t zero_point, double input_scale, const QuantizedWeight& w,
                         const at::Tensor& bias) {
  const at::Tensor sums = at::matmul((codes - zero_point).to(at::kDouble), w.values.to(at::kDouble).t());
  return sums * input_scale * w.scales.to(at::kDouble) + bias.to(at::kDouble);
}

TEST(Int8Linear, OnObserverCodesGivesTheExactIntegerSumUpToFloatRounding) {
  ASSERT_EQ(Int8Linear::unavailable_reason(), "");
  at::manual_seed(3);
  const int64_t rows = 17, cols = 33;  // an odd column count leaves the last pair half empty
  QuantizedWeight w{at::randint(-127, 128, {rows, cols}, at::TensorOptions().dtype(at::kChar)),
                    at::rand({rows}) * 0.01 + 1e-3};
  const at::Tensor bias = at::randn({rows});
  const QParams input{0.0173, 41};
  const int64_t qmax = 127;  // 7-bit codes: no int8 weight can saturate
  ASSERT_TRUE(Int8Linear::saturation_free(w.values, qmax));
  const at::Tensor codes = at::randint(0, qmax + 1, {3, 5, cols}, at::TensorOptions().dtype(at::kLong));
  // The values an observer's fake quantization gives for those codes.
  const at::Tensor x = ((codes - input.zero_point).to(at::kFloat) * static_cast<float>(input.scale));

  const Int8Linear product(w, bias, input, qmax);
  const at::Tensor got = product.forward(x);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{3, 5, rows}));
  const at::Tensor want = exact_product(codes, input.zero_point, input.scale, w, bias);
  const double worst = ((got.to(at::kDouble) - want).abs() / (want.abs() + 1.0)).max().item<double>();
  EXPECT_LT(worst, 1e-6);
}

TEST(Int8Linear, WorksWithoutABias) {
  QuantizedWeight w{at::full({2, 2}, 3, at::TensorOptions().dtype(at::kChar)), at::full({2}, 0.5)};
  const Int8Linear product(w, at::Tensor(), QParams{1.0, 0}, 127);
  // (2 * 3 + 4 * 3) * 1 * 0.5 = 9 in each channel.
  const at::Tensor got = product.forward(at::tensor({2.0f, 4.0f}).view({1, 2}));
  EXPECT_FLOAT_EQ(got[0][0].item<float>(), 9.0f);
  EXPECT_FLOAT_EQ(got[0][1].item<float>(), 9.0f);
}

at::Tensor row(std::vector<int8_t> values) {
  return at::tensor(std::vector<int64_t>(values.begin(), values.end())).to(at::kChar).view({1, -1});
}

TEST(Int8Linear, SaturationBoundIsPerPairOfAdjacentColumns) {
  // 255 * (64 + 64) = 32640 fits int16; 255 * (65 + 64) = 32895 does not.
  EXPECT_TRUE(Int8Linear::saturation_free(row({64, 64}), 255));
  EXPECT_FALSE(Int8Linear::saturation_free(row({65, 64}), 255));
  // Columns 1 and 2 are not a pair: (0, 127) and (127, 0) each stay within the bound.
  EXPECT_TRUE(Int8Linear::saturation_free(row({0, 127, 127, 0}), 255));
  // Opposite signs in a pair never add up; the negative side may reach -32768.
  EXPECT_TRUE(Int8Linear::saturation_free(row({127, -127}), 255));
  EXPECT_FALSE(Int8Linear::saturation_free(row({-65, -64}), 255));
  EXPECT_TRUE(Int8Linear::saturation_free(row({-64, -64}), 256));  // 256 * 128 = 32768
  // An odd last column pairs with nothing.
  EXPECT_TRUE(Int8Linear::saturation_free(row({0, 0, 127}), 255));
  // 7-bit codes: any int8 weight is safe (127 * 254 = 32258); 4-bit weights at 8 bits too.
  EXPECT_TRUE(Int8Linear::saturation_free(row({127, 127, -127, -127}), 127));
  EXPECT_TRUE(Int8Linear::saturation_free(row({7, 7, -7, -7}), 255));
}

TEST(Int8Linear, RefusesWeightsThatDoNotFit) {
  const QuantizedWeight w{at::zeros({4, 3}, at::TensorOptions().dtype(at::kChar)), at::full({4}, 0.1)};
  EXPECT_THROW(Int8Linear(w, at::zeros({5}), QParams{1.0, 0}, 127), Error);
  EXPECT_THROW(Int8Linear(QuantizedWeight{w.values.to(at::kFloat), w.scales}, at::Tensor(), QParams{1.0, 0}, 127),
               Error);
  EXPECT_THROW(Int8Linear(w, at::Tensor(), QParams{1.0, 200}, 127), Error);
  const Int8Linear product(w, at::Tensor(), QParams{1.0, 0}, 127);
  EXPECT_THROW(product.forward(at::zeros({2, 4})), c10::Error);
}

}  // namespace
}  // namespace qtft::quant
