#include "qtft/train/fused_adam.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <vector>

#include "qtft/memory/memory_tracker.h"

namespace qtft::train {
namespace {

std::vector<at::Tensor> make_params() {
  torch::manual_seed(5);
  return {at::randn({7, 3}).requires_grad_(true), at::randn({3}).requires_grad_(true),
          at::randn({4, 5}).requires_grad_(true)};
}

// The same loss for both optimizers: one that moves every parameter differently.
void backward(const std::vector<at::Tensor>& params, int step) {
  at::Tensor loss = (params[0] * params[0]).sum() * (step + 1) + params[1].sin().sum() + (params[2].exp() * 0.1).sum();
  loss.backward();
}

TEST(FusedAdamTest, AStepThatRunsOutOfMemoryLeavesTheStateAsItWas) {
  // The tracking allocator's limit leaves room for the first parameter's moments only: the
  // step fails part way through its allocations, and nothing of it may stay behind (a
  // checkpoint saved then would resume with half-made moments and advanced counts).
  auto ours = make_params(), theirs = make_params();
  const auto options = torch::optim::AdamOptions(1e-2);
  FusedAdam fused(ours, options), reference(theirs, options);
  backward(ours, 0);
  backward(theirs, 0);
  {
    struct Lifted {
      ~Lifted() { memory::set_cpu_memory_limit(0); }
    } lifted;
    memory::set_cpu_memory_limit(memory::memory_stats(c10::Device(c10::kCPU)).current_bytes +
                                 2 * static_cast<int64_t>(ours[0].nbytes()));
    EXPECT_THROW(fused.step(), c10::OutOfMemoryError);
  }
  EXPECT_TRUE(fused.state().empty());
  fused.step();
  reference.step();
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(at::equal(ours[i], theirs[i])) << "parameter " << i;
    EXPECT_EQ(static_cast<const torch::optim::AdamParamState&>(*fused.state().at(ours[i].unsafeGetTensorImpl())).step(),
              1);
  }
}

TEST(FusedAdamTest, StepsAsTorchOptimAdamToRounding) {
  for (const double decay : {0.0, 0.01}) {
    auto ours = make_params(), theirs = make_params();
    const auto options = torch::optim::AdamOptions(1e-2).weight_decay(decay);
    FusedAdam fused(ours, options);
    torch::optim::Adam reference(theirs, options);
    for (int step = 0; step < 6; ++step) {
      fused.zero_grad();
      reference.zero_grad();
      backward(ours, step);
      backward(theirs, step);
      fused.step();
      reference.step();
    }
    for (size_t i = 0; i < ours.size(); ++i) {
      EXPECT_TRUE(at::allclose(ours[i], theirs[i], 1e-5, 1e-6)) << "parameter " << i << ", decay " << decay;
      const auto& a =
          static_cast<const torch::optim::AdamParamState&>(*fused.state().at(ours[i].unsafeGetTensorImpl()));
      const auto& b =
          static_cast<const torch::optim::AdamParamState&>(*reference.state().at(theirs[i].unsafeGetTensorImpl()));
      EXPECT_EQ(a.step(), 6);
      EXPECT_EQ(a.step(), b.step());
      EXPECT_TRUE(at::allclose(a.exp_avg(), b.exp_avg(), 1e-5, 1e-7)) << i;
      EXPECT_TRUE(at::allclose(a.exp_avg_sq(), b.exp_avg_sq(), 1e-5, 1e-9)) << i;
    }
    // It really moved them: not a no-op that both sides share.
    EXPECT_FALSE(at::allclose(ours[0], make_params()[0], 1e-3, 1e-3));
  }
}

TEST(FusedAdamTest, SkipsParametersWithoutGradientAndFollowsTheLearningRate) {
  auto params = make_params();
  FusedAdam adam(params, torch::optim::AdamOptions(1e-2));
  (params[0] * params[0]).sum().backward();  // only the first gets a gradient
  const at::Tensor untouched = params[1].detach().clone();
  adam.step();
  EXPECT_EQ(adam.state().count(params[1].unsafeGetTensorImpl()), 0u);
  EXPECT_TRUE(at::equal(params[1], untouched));

  static_cast<torch::optim::AdamOptions&>(adam.param_groups()[0].options()).lr(0.0);
  const at::Tensor before = params[0].detach().clone();
  adam.step();
  EXPECT_TRUE(at::equal(params[0], before));
}

}  // namespace
}  // namespace qtft::train
