#include "qtft/quant/grouped_observer.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/stack.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "memory/bitwise.h"
#include "qtft/quant/detail/fake_quantize.h"

namespace qtft::quant {
namespace {

using test::bitwise_equal;

// Two identical groups of n observers: one run slice by slice (the reference), one as a group.
struct Groups {
  std::vector<ActivationFakeQuant> separate, grouped;

  explicit Groups(int64_t n, ObserverUpdate update = ObserverUpdate::Immediate) {
    for (int64_t i = 0; i < n; ++i) {
      separate.emplace_back(ActivationFakeQuantOptions{}.averaging_constant(0.25));
      grouped.emplace_back(ActivationFakeQuantOptions{}.averaging_constant(0.25));
      separate.back()->set_update(update);
      grouped.back()->set_update(update);
    }
  }
  std::vector<ActivationFakeQuantImpl*> grouped_pointers() {
    std::vector<ActivationFakeQuantImpl*> p;
    for (auto& o : grouped) p.push_back(o.get());
    return p;
  }
  // The reference: slice i through separate[i] (forward or reapply), restacked.
  at::Tensor run_separately(const at::Tensor& x, int64_t dim, bool observe = true) {
    std::vector<at::Tensor> slices = x.unbind(dim);
    for (size_t i = 0; i < slices.size(); ++i) {
      slices[i] = observe ? separate[i]->forward(slices[i]) : separate[i]->reapply(slices[i]);
    }
    return at::stack(slices, dim);
  }
  void expect_same_state() const {
    for (size_t i = 0; i < separate.size(); ++i) {
      const auto a = separate[i]->named_buffers(), b = grouped[i]->named_buffers();
      for (const auto& item : a) {
        EXPECT_TRUE(bitwise_equal(item.value(), b[item.key()])) << "observer " << i << ", " << item.key();
      }
      EXPECT_TRUE(bitwise_equal(separate[i]->step_extremes(), grouped[i]->step_extremes())) << "observer " << i;
    }
  }
};

// Slices of very different ranges, so that every observer gets its own scale and zero point.
at::Tensor slices_of_different_ranges(std::vector<int64_t> shape, int64_t dim, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<int64_t> scale_shape(shape.size(), 1);
  scale_shape[dim] = shape[dim];
  const at::Tensor per_slice = (at::arange(shape[dim], at::kFloat) * 0.7 + 0.1).reshape(scale_shape);
  return at::randn(shape) * per_slice + per_slice;
}

// Output, gradient and every observer's buffers bitwise those of separate observers, over
// steps that move the moving averages.
void expect_as_separate_observers(std::vector<int64_t> shape, int64_t dim, ObserverUpdate update) {
  const int64_t wrapped = dim < 0 ? dim + static_cast<int64_t>(shape.size()) : dim;
  Groups g(shape[wrapped], update);
  for (uint64_t step = 0; step < 3; ++step) {
    const at::Tensor values = slices_of_different_ranges(shape, wrapped, step);
    const at::Tensor weights = at::randn(shape);
    const at::Tensor a = values.clone().requires_grad_(true), b = values.clone().requires_grad_(true);
    const at::Tensor expected = g.run_separately(a * 1.0, dim);
    const at::Tensor got = observe_slices(g.grouped_pointers(), b * 1.0, dim);
    (expected * weights).sum().backward();
    (got * weights).sum().backward();
    EXPECT_TRUE(bitwise_equal(got, expected)) << "step " << step;
    EXPECT_TRUE(bitwise_equal(b.grad(), a.grad())) << "step " << step;
    g.expect_same_state();
    if (update == ObserverUpdate::Step) {
      for (size_t i = 0; i < g.separate.size(); ++i) {
        g.separate[i]->end_step(g.separate[i]->step_extremes());
        g.grouped[i]->end_step(g.grouped[i]->step_extremes());
      }
      g.expect_same_state();
    }
  }
}

TEST(ObserveSlicesTest, ImmediateAsSeparateObserversAlongTheFirstDimension) {
  expect_as_separate_observers({5, 40, 7}, 0, ObserverUpdate::Immediate);
}

TEST(ObserveSlicesTest, ImmediateAsSeparateObserversAlongAnInnerDimension) {
  // [batch, time, variables, width], as the embeddings of real inputs.
  expect_as_separate_observers({4, 6, 5, 3}, -2, ObserverUpdate::Immediate);
}

TEST(ObserveSlicesTest, StepModeAsSeparateObservers) {
  // The first step passes every slice through unchanged and records; the later ones
  // quantize with the parameters of the step before.
  expect_as_separate_observers({3, 9, 11}, 1, ObserverUpdate::Step);
}

TEST(ObserveSlicesTest, FrozenEvalAndReappliedAsSeparateObservers) {
  Groups g(4);
  const at::Tensor first = slices_of_different_ranges({4, 30, 5}, 0, 7);
  g.run_separately(first, 0);
  observe_slices(g.grouped_pointers(), first.clone(), 0);
  const at::Tensor next = slices_of_different_ranges({4, 30, 5}, 0, 8) * 1.5;
  EXPECT_TRUE(bitwise_equal(observe_slices(g.grouped_pointers(), next.clone(), 0, /*observe=*/false),
                            g.run_separately(next, 0, /*observe=*/false)));
  g.expect_same_state();
  for (auto& o : g.grouped) o->freeze();
  for (auto& o : g.separate) o->freeze();
  EXPECT_TRUE(bitwise_equal(observe_slices(g.grouped_pointers(), next.clone(), 0), g.run_separately(next, 0)));
  for (auto& o : g.grouped) o->eval();
  for (auto& o : g.separate) o->eval();
  for (auto& o : g.grouped) o->unfreeze();
  for (auto& o : g.separate) o->unfreeze();
  EXPECT_TRUE(bitwise_equal(observe_slices(g.grouped_pointers(), next.clone(), 0), g.run_separately(next, 0)));
  g.expect_same_state();
}

TEST(ObserveSlicesTest, ObserversNeverObservedPassTheirSlicesThrough) {
  Groups g(3);
  const at::Tensor x = slices_of_different_ranges({3, 8, 2}, 0, 3);
  // Nothing observed: reapplying is x itself.
  EXPECT_TRUE(bitwise_equal(observe_slices(g.grouped_pointers(), x, 0, /*observe=*/false), x));
  // Only the middle observer has parameters: the others' slices come back as they were.
  g.separate[1]->forward(x[1]);
  g.grouped[1]->forward(x[1]);
  const at::Tensor got = observe_slices(g.grouped_pointers(), x, 0, /*observe=*/false);
  EXPECT_TRUE(bitwise_equal(got, g.run_separately(x, 0, /*observe=*/false)));
  EXPECT_TRUE(bitwise_equal(got[0], x[0]));
  EXPECT_FALSE(bitwise_equal(got[1], x[1]));
}

// Slices along a middle dimension of a tensor of several tasks (32768 elements each), whose
// slice runs (111 elements) straddle the mask's 512-element chunks and bytes.
TEST(FakeQuantizePerSliceTest, EachSliceBitwiseItsOwnPerTensorQuantization) {
  const at::Tensor values = slices_of_different_ranges({13, 50, 111}, 1, 11) * 10.0;
  ASSERT_GT(values.numel(), 2 * 32768);
  std::vector<at::Tensor> scales, zero_points;
  for (int64_t i = 0; i < 50; ++i) {
    scales.push_back(at::full({1}, 0.01f * static_cast<float>(i + 1), at::kFloat));
    zero_points.push_back(at::full({1}, static_cast<int32_t>(i * 5), at::kInt));
  }
  const at::Tensor weights = at::randn(values.sizes());
  const at::Tensor a = values.clone().requires_grad_(true), b = values.clone().requires_grad_(true);
  std::vector<at::Tensor> slices = a.unbind(1);
  for (size_t i = 0; i < slices.size(); ++i) {
    slices[i] = fake_quantize_per_tensor(slices[i], scales[i], zero_points[i], 0, 255);
  }
  const at::Tensor expected = at::stack(slices, 1);
  const at::Tensor got = fake_quantize_per_slice(b * 1.0, 1, scales, zero_points, 0, 255);
  (expected * weights).sum().backward();
  (got * weights).sum().backward();
  EXPECT_TRUE(bitwise_equal(got, expected));
  EXPECT_TRUE(bitwise_equal(b.grad(), a.grad()));
  EXPECT_GT(got._version(), 0) << "a temporary is quantized in its own memory";
  // Some values are clamped in some slices: the gradient's mask is not all ones.
  EXPECT_FALSE(bitwise_equal(b.grad(), weights));
  c10::NoGradGuard no_grad;
  EXPECT_TRUE(bitwise_equal(fake_quantize_per_slice(values, 1, scales, zero_points, 0, 255), expected));
}

}  // namespace
}  // namespace qtft::quant
