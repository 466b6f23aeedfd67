#include "qtft/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>
#include <cstdint>
#include <mutex>

#include "memory/bitwise.h"
#include "qtft/memory/detail/recompute_context.h"
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

// The float mask the unfused dropout multiplied by: element e of block e / 4096 takes 16
// bits of word (e % 4096) / 2 of at::Philox4_32 keyed by the call's draw on that block's
// subsequence, the low half for even e.
at::Tensor philox_mask(int64_t n, double keep, uint64_t key, at::ScalarType type) {
  const auto threshold = static_cast<uint32_t>(std::lround(keep * 65536.0));
  at::Tensor mask = at::empty({n}, at::kDouble);
  double* m = mask.data_ptr<double>();
  const double scale = type == at::kFloat ? static_cast<double>(1.0f / static_cast<float>(keep)) : 1.0 / keep;
  for (int64_t begin = 0; begin < n; begin += 4096) {
    at::Philox4_32 engine(key, static_cast<uint64_t>(begin / 4096), 0);
    for (int64_t e = begin; e < std::min(n, begin + 4096); e += 2) {
      const uint32_t word = engine();
      m[e] = (word & 0xffffu) < threshold ? scale : 0.0;
      if (e + 1 < n) m[e + 1] = (word >> 16) < threshold ? scale : 0.0;
    }
  }
  return mask.to(type);
}

uint64_t next_key_of_default_generator() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
}

class DropoutKernelTest : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(DropoutKernelTest, IsAtMulWithThePhiloxMaskForwardAndBackward) {
  torch::manual_seed(11);
  const at::Tensor x = at::randn({257, 333}, GetParam());  // odd, and not a multiple of a block
  const at::Tensor grad = at::randn({257, 333}, GetParam());
  const memory::RngState start = memory::RngState::capture({});
  const at::Tensor mask = philox_mask(x.numel(), 0.75, next_key_of_default_generator(), GetParam()).view(x.sizes());
  start.restore();
  const at::Tensor leaf = x.clone().requires_grad_(true);
  const at::Tensor out = apply_dropout(leaf, 0.25, true);
  out.backward(grad);
  EXPECT_TRUE(bitwise_equal(out.detach(), at::mul(x, mask)));
  EXPECT_TRUE(bitwise_equal(leaf.grad(), at::mul(grad, mask)));
  // Without gradient, the same product.
  start.restore();
  EXPECT_TRUE(bitwise_equal(apply_dropout(x, 0.25, true), at::mul(x, mask)));
}

INSTANTIATE_TEST_SUITE_P(FloatAndDouble, DropoutKernelTest, ::testing::Values(at::kFloat, at::kDouble));

TEST(DropoutTest, RecomputeReplaysTheRecordedBitsInsteadOfDrawing) {
  Dropout layer(0.5);
  const at::Tensor x = at::randn({64, 100});
  memory::RecomputeTape tape;
  torch::manual_seed(5);
  at::Tensor first;
  {
    memory::SegmentPassScope recording(memory::SegmentPass::Recording, &tape);
    first = layer(x);
  }
  // Another generator state: a drawn mask would differ (checked below), a replayed one not.
  torch::manual_seed(6);
  at::Tensor again;
  {
    memory::SegmentPassScope replaying(memory::SegmentPass::Replaying, &tape);
    again = layer(x);
  }
  EXPECT_TRUE(bitwise_equal(first, again));
  EXPECT_NO_THROW(tape.check_replayed_all());
  torch::manual_seed(6);
  EXPECT_FALSE(bitwise_equal(layer(x), first));
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
