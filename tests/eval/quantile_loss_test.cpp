// The pinball loss on cases small enough to work out by hand, and its gradient.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/Context.h>
#include <ATen/ops/tensor.h>

#include "qtft/common/error.h"
#include "qtft/eval/quantile_loss.h"
#include "support/temp_dir.h"

namespace qtft::eval {
namespace {

using ::testing::HasSubstr;

// One window, two steps, quantiles 0.1 and 0.9; e = y - f:
//   step 0: y =  1, f = ( 0,  2): e = ( 1, -1) -> max(0.1*1, -0.9*1) = 0.1, max(0.9*-1, 0.1*1) = 0.1
//   step 1: y = -2, f = (-1, -3): e = (-1,  1) -> max(-0.1, 0.9) = 0.9,      max(0.9, -0.1) = 0.9
// sum 2.0 over N = 4 values: loss 0.5.
struct HandCase {
  std::vector<double> quantiles{0.1, 0.9};
  at::Tensor forecast(at::ScalarType dtype = at::kDouble) const {
    return at::tensor({0.0, 2.0, -1.0, -3.0}, at::TensorOptions().dtype(dtype)).reshape({1, 2, 2});
  }
  at::Tensor target(at::ScalarType dtype = at::kDouble) const {
    return at::tensor({1.0, -2.0}, at::TensorOptions().dtype(dtype)).reshape({1, 2});
  }
};

TEST(QuantileLoss, HandComputedValue) {
  HandCase c;
  EXPECT_DOUBLE_EQ(quantile_loss(c.forecast(), c.target(), c.quantiles).item<double>(), 0.5);
  auto loss = quantile_loss(c.forecast(at::kFloat), c.target(at::kFloat), c.quantiles);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  EXPECT_EQ(loss.dim(), 0);
  EXPECT_NEAR(loss.item<float>(), 0.5f, 1e-7);
}

TEST(QuantileLoss, TargetTakesTheForecastsDtype) {
  HandCase c;
  auto loss = quantile_loss(c.forecast(at::kDouble), c.target(at::kFloat), c.quantiles);
  EXPECT_EQ(loss.scalar_type(), at::kDouble);
  EXPECT_DOUBLE_EQ(loss.item<double>(), 0.5);
}

TEST(QuantileLoss, GradientIsMinusQOrOneMinusQOverN) {
  // d/df max(q e, (q - 1) e) with e = y - f is -q where y > f and 1 - q where y < f;
  // the mean divides by N = 4.
  HandCase c;
  auto forecast = c.forecast().requires_grad_(true);
  quantile_loss(forecast, c.target(), c.quantiles).backward();
  auto grad = forecast.grad().reshape({-1});
  ASSERT_EQ(grad.numel(), 4);
  EXPECT_DOUBLE_EQ(grad[0].item<double>(), -0.1 / 4);       // step 0, q 0.1: y > f
  EXPECT_DOUBLE_EQ(grad[1].item<double>(), (1 - 0.9) / 4);  // step 0, q 0.9: y < f
  EXPECT_DOUBLE_EQ(grad[2].item<double>(), (1 - 0.1) / 4);  // step 1, q 0.1: y < f
  EXPECT_DOUBLE_EQ(grad[3].item<double>(), -0.9 / 4);       // step 1, q 0.9: y > f
}

TEST(QuantileLoss, MedianIsHalfTheMeanAbsoluteError) {
  auto forecast = at::tensor({1.0, -1.0, 4.0}, at::kDouble).reshape({3, 1, 1});
  auto target = at::tensor({2.0, 1.0, 0.0}, at::kDouble).reshape({3, 1});
  // |e| = 1, 2, 4: mean 7/3, half of it 7/6.
  EXPECT_DOUBLE_EQ(quantile_loss(forecast, target, {0.5}).item<double>(), 7.0 / 6.0);
}

TEST(QuantileLoss, RejectsMismatchedShapesWithClearMessages) {
  HandCase c;
  EXPECT_THAT(test::error_message([&] {
                quantile_loss(c.forecast().reshape({2, 2}), c.target(), c.quantiles);
              }),
              HasSubstr("expected forecast [batch, horizon, quantiles]"));
  EXPECT_THAT(test::error_message([&] {
                quantile_loss(c.forecast(), c.target().reshape({2, 1}), c.quantiles);
              }),
              HasSubstr("expected target [1, 2]"));
  EXPECT_THAT(test::error_message([&] {
                quantile_loss(c.forecast(), c.target(), {0.1, 0.5, 0.9});
              }),
              HasSubstr("forecast has 2 quantile outputs but 3 quantiles were given"));
}

TEST(QuantileLoss, RejectsQuantilesOutsideZeroOne) {
  HandCase c;
  EXPECT_THROW(quantile_loss(c.forecast(), c.target(), {0.1, 1.0}), Error);
  EXPECT_THROW(quantile_loss(c.forecast(), c.target(), {0.0, 0.5}), Error);
  EXPECT_THAT(test::error_message([] { check_quantiles({}); }), HasSubstr("at least one quantile"));
  EXPECT_THAT(test::error_message([] { check_quantiles({0.5, 1.5}); }), HasSubstr("got 1.5"));
}

TEST(QuantileLoss, SameValueAndGradientOnCuda) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  HandCase c;
  auto forecast = c.forecast(at::kFloat).to(at::kCUDA).requires_grad_(true);
  auto loss = quantile_loss(forecast, c.target(at::kFloat), c.quantiles);  // target moved to the forecast
  EXPECT_TRUE(loss.is_cuda());
  EXPECT_NEAR(loss.item<float>(), 0.5f, 1e-7);
  loss.backward();
  auto grad = forecast.grad().to(at::kCPU).reshape({-1});
  EXPECT_NEAR(grad[3].item<float>(), -0.9f / 4, 1e-7);
}

}  // namespace
}  // namespace qtft::eval
