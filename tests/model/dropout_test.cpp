#include "qtft/model/dropout.h"

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>

#include "memory/bitwise.h"
#include "qtft/memory/rng_state.h"

namespace qtft::model {
namespace {

using test::bitwise_equal;

TEST(DropoutTest, KeepsAboutOneMinusPAndScalesTheKeptOnes) {
  torch::manual_seed(7);
  const int64_t n = 1 << 20;
  const at::Tensor out = apply_dropout(at::ones({n}), 0.3, /*training=*/true);
  const auto kept = (out != 0).sum().item<int64_t>();
  // Binomial(n, 0.7): the standard deviation is sqrt(n * 0.21), about 470; 5 of them.
  EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 5 * std::sqrt(n * 0.21));
  const float scale = 1.0f / static_cast<float>(0.7);
  EXPECT_EQ(((out != 0) & (out != scale)).sum().item<int64_t>(), 0);
}

TEST(DropoutTest, OutsideTrainingOrAtZeroItIsTheIdentity) {
  const at::Tensor x = at::randn({16, 8});
  EXPECT_TRUE(apply_dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_TRUE(apply_dropout(x, 0.0, /*training=*/true).is_same(x));
  EXPECT_EQ(apply_dropout(x, 1.0, true).abs().sum().item<float>(), 0.0f);
}

TEST(DropoutTest, MaskDependsOnTheGeneratorAloneNotOnThreads) {
  const at::Tensor x = at::randn({257, 333});  // not a multiple of the block size
  const int threads = at::get_num_threads();
  torch::manual_seed(42);
  const memory::RngState start = memory::RngState::capture({});
  at::set_num_threads(1);
  const at::Tensor one = apply_dropout(x, 0.2, true);
  start.restore();
  at::set_num_threads(3);
  const at::Tensor three = apply_dropout(x, 0.2, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(bitwise_equal(one, three));
  // The generator moved on: the next call draws another mask.
  EXPECT_FALSE(bitwise_equal(apply_dropout(x, 0.2, true), three));
}

TEST(DropoutTest, GradientIsTheSameScaledMask) {
  torch::manual_seed(3);
  const at::Tensor x = at::randn({64, 32}).requires_grad_(true);
  const at::Tensor out = apply_dropout(x, 0.4, true);
  out.sum().backward();
  // out = x * m, so d(sum out)/dx = m = out / x wherever x is not 0.
  EXPECT_TRUE(bitwise_equal(x.grad() * x.detach(), out.detach()));
  EXPECT_EQ(((x.grad() != 0) != (out != 0)).sum().item<int64_t>(), 0);
}

TEST(DropoutTest, ModuleFollowsTrainAndEval) {
  Dropout layer(0.5);
  const at::Tensor x = at::ones({1000});
  EXPECT_GT((layer(x) == 0).sum().item<int64_t>(), 0);
  layer->eval();
  EXPECT_TRUE(layer(x).is_same(x));
  EXPECT_THROW(Dropout(1.0), c10::Error);
}

}  // namespace
}  // namespace qtft::model
