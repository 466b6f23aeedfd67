// qtft::memory::checkpoint on small hand-built segments: gradients, layer state and the
// random stream come out bitwise as without recompute, and misuse fails with a message.
#include "qtft/memory/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <string>

#include "memory/bitwise.h"
#include "qtft/memory/detail/recompute_context.h"
#include "qtft/quant/activation_observer.h"

namespace qtft::memory {
namespace {

using Tensors = std::vector<at::Tensor>;
using test::bitwise_equal;

// Two linear layers, one observer called on both of their outputs (the same layer twice
// in one segment), and dropout in between.
struct Net {
  torch::nn::Linear first{nullptr}, second{nullptr};
  quant::ActivationFakeQuant observer{nullptr};
  torch::nn::Dropout dropout{nullptr};

  explicit Net(uint64_t seed) {
    torch::manual_seed(seed);
    first = torch::nn::Linear(6, 5);
    second = torch::nn::Linear(5, 5);
    observer = quant::ActivationFakeQuant(quant::ActivationFakeQuantOptions().averaging_constant(0.5));
    dropout = torch::nn::Dropout(0.3);
  }
  Tensors segment(const Tensors& in) {
    at::Tensor a = observer(first(in[0]));
    at::Tensor b = observer(second(dropout(a)).tanh());
    return {a + b};
  }
  Tensors parameters() const {
    Tensors p;
    for (const auto& m : {first->weight, first->bias, second->weight, second->bias}) p.push_back(m);
    return p;
  }
};

struct StepResult {
  at::Tensor output;
  Tensors grads;
  int64_t observer_samples = 0;
  quant::QParams qparams;
  at::Tensor rng_after;
  at::Tensor input_grad;
};

// Two steps of forward + backward through the segment (the observer has history in the
// second), from the same seed; `mode` picks plain, checkpointed or naive recompute.
enum class Mode { Plain, Checkpointed, Naive };
StepResult run(Mode mode, bool input_requires_grad) {
  Net net(3);
  torch::manual_seed(11);
  StepResult r;
  for (int step = 0; step < 2; ++step) {
    at::Tensor x = torch::randn({4, 6});
    if (input_requires_grad) x.requires_grad_(true);
    auto fn = [&net](const Tensors& in) { return net.segment(in); };
    Tensors out = mode == Mode::Plain ? run_segment("net", false, {x}, fn)
                                      : checkpoint("net", fn, {x}, CheckpointOptions{mode == Mode::Checkpointed});
    for (auto& p : net.parameters()) p.mutable_grad() = at::Tensor();
    (out[0] * out[0]).sum().backward();
    r.output = out[0].detach();
    r.grads.clear();
    for (const auto& p : net.parameters()) r.grads.push_back(p.grad());
    if (input_requires_grad) r.input_grad = x.grad();
  }
  r.observer_samples = net.observer->samples();
  r.qparams = net.observer->qparams();
  r.rng_after = at::detail::getDefaultCPUGenerator().get_state();
  return r;
}

void expect_same(const StepResult& a, const StepResult& b) {
  EXPECT_TRUE(bitwise_equal(a.output, b.output));
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_TRUE(a.grads[i].defined()) << "parameter " << i << " got no gradient";
    EXPECT_TRUE(bitwise_equal(a.grads[i], b.grads[i])) << "parameter " << i;
  }
  EXPECT_TRUE(bitwise_equal(a.input_grad, b.input_grad));
  EXPECT_EQ(a.observer_samples, b.observer_samples);
  EXPECT_EQ(a.qparams.scale, b.qparams.scale);
  EXPECT_EQ(a.qparams.zero_point, b.qparams.zero_point);
  EXPECT_TRUE(bitwise_equal(a.rng_after, b.rng_after)) << "the random stream after the step moved";
}

TEST(Checkpoint, MatchesThePlainSegmentBitwiseWithObserverCalledTwiceAndDropout) {
  const StepResult plain = run(Mode::Plain, true);
  const StepResult checkpointed = run(Mode::Checkpointed, true);
  EXPECT_EQ(plain.observer_samples, 4);  // two calls per step, two steps
  expect_same(plain, checkpointed);
}

TEST(Checkpoint, ParametersGetGradientsWhenNoInputRequiresGrad) {
  // The missing-backward-node pitfall: the segment's only input is data.
  const StepResult plain = run(Mode::Plain, false);
  const StepResult checkpointed = run(Mode::Checkpointed, false);
  expect_same(plain, checkpointed);
}

TEST(Checkpoint, NaiveRecomputeDoubleCountsObserversAndChangesGradients) {
  // What PyTorch's checkpoint does to running state: the recompute observes again.
  const StepResult plain = run(Mode::Plain, true);
  const StepResult naive = run(Mode::Naive, true);
  EXPECT_EQ(naive.observer_samples, 2 * plain.observer_samples);
  bool any_gradient_differs = false;
  for (size_t i = 0; i < plain.grads.size(); ++i)
    any_gradient_differs |= !bitwise_equal(plain.grads[i], naive.grads[i]);
  EXPECT_TRUE(any_gradient_differs);
  EXPECT_NE(plain.qparams.scale, naive.qparams.scale);
}

TEST(Checkpoint, RecomputeContextIsSetOnlyDuringTheReplay) {
  std::vector<SegmentPass> seen;
  at::Tensor x = torch::ones({2}, torch::requires_grad());
  auto fn = [&seen](const Tensors& in) {
    seen.push_back(current_segment_pass());
    return Tensors{in[0] * 2};
  };
  checkpoint("probe", fn, {x})[0].sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], SegmentPass::Recording);
  EXPECT_EQ(seen[1], SegmentPass::Replaying);
  EXPECT_EQ(current_segment_pass(), SegmentPass::Plain);
  EXPECT_FALSE(is_recomputing());
  EXPECT_TRUE(bitwise_equal(x.grad(), torch::full({2}, 2.0f)));
}

TEST(Checkpoint, RunsPlainlyWithoutGradient) {
  int calls = 0;
  auto fn = [&calls](const Tensors& in) {
    ++calls;
    return Tensors{in[0] + 1};
  };
  torch::NoGradGuard no_grad;
  Tensors out = checkpoint("no_grad", fn, {torch::zeros({3})});
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(out[0].requires_grad());
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Checkpoint, RefusesAutogradGrad) {
  torch::nn::Linear layer(3, 2);
  at::Tensor x = torch::randn({4, 3}, torch::requires_grad());
  auto out = checkpoint("linear", [&layer](const Tensors& in) { return Tensors{layer(in[0])}; }, {x});
  const std::string message = error_of([&] { torch::autograd::grad({out[0].sum()}, {x}); });
  EXPECT_NE(message.find("checkpoint segment 'linear'"), std::string::npos) << message;
  EXPECT_NE(message.find("torch::autograd::grad"), std::string::npos) << message;
}

TEST(Checkpoint, RefusesAnInputModifiedInPlaceAfterTheForward) {
  at::Tensor x = torch::randn({4, 3}, torch::requires_grad());
  at::Tensor y = x * 1;  // a non-leaf input, which may be modified in place
  auto out = checkpoint("scale", [](const Tensors& in) { return Tensors{in[0] * 3}; }, {y});
  {
    torch::NoGradGuard no_grad;
    y.add_(1);
  }
  const std::string message = error_of([&] { out[0].sum().backward(); });
  EXPECT_NE(message.find("modified by an inplace operation"), std::string::npos) << message;
}

TEST(Checkpoint, RefusesARecomputeThatTakesAnotherPath) {
  quant::ActivationFakeQuant observer;
  int calls = 0;
  at::Tensor x = torch::randn({4, 3}, torch::requires_grad());
  // Calls the observer once in the forward and twice in the recompute.
  auto fn = [&](const Tensors& in) {
    at::Tensor y = observer(in[0]);
    if (++calls > 1) y = observer(y);
    return Tensors{y * 2};
  };
  auto out = checkpoint("unstable", fn, {x});
  const std::string message = error_of([&] { out[0].sum().backward(); });
  EXPECT_NE(message.find("checkpoint segment 'unstable'"), std::string::npos) << message;
  EXPECT_NE(message.find("same layers in the same order"), std::string::npos) << message;
}

TEST(Checkpoint, RefusesToReturnAnInputUnchanged) {
  at::Tensor x = torch::randn({2}, torch::requires_grad());
  const std::string message = error_of([&] { checkpoint("identity", [](const Tensors& in) { return in; }, {x}); });
  EXPECT_NE(message.find("is one of its inputs"), std::string::npos) << message;
}

}  // namespace
}  // namespace qtft::memory
