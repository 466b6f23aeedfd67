#include "qtft/model/detail/gated_add_norm.h"

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sigmoid.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <vector>

#include "memory/bitwise.h"

namespace qtft::model::detail {
namespace {

using test::bitwise_equal;

struct Inputs {
  std::vector<at::Tensor> tensors;  // linear, gate, skip, weight, bias
};

Inputs random_inputs(std::vector<int64_t> shape, at::ScalarType dtype, uint64_t seed) {
  torch::manual_seed(seed);
  const auto options = at::TensorOptions().dtype(dtype);
  const int64_t d = shape.back();
  Inputs in;
  for (int i = 0; i < 3; ++i) in.tensors.push_back(at::randn(shape, options).requires_grad_(true));
  in.tensors.push_back((1 + 0.1 * at::randn({d}, options)).requires_grad_(true));
  in.tensors.push_back((0.1 * at::randn({d}, options)).requires_grad_(true));
  return in;
}

constexpr double kEps = 1e-5;

at::Tensor unfused(const std::vector<at::Tensor>& t) {
  return at::layer_norm(t[2] + at::sigmoid(t[1]) * t[0], {t[0].size(-1)}, t[3], t[4], kEps);
}

at::Tensor fused(const std::vector<at::Tensor>& t) { return gated_add_norm(t[0], t[1], t[2], t[3], t[4], kEps); }

// The output, then the gradients of the five inputs, for a fixed weighting of the outputs
// (their plain sum would have a zero gradient through the LayerNorm).
std::vector<at::Tensor> value_and_gradients(const std::vector<at::Tensor>& inputs, bool use_fused,
                                            const at::Tensor& weighting) {
  const at::Tensor out = use_fused ? fused(inputs) : unfused(inputs);
  std::vector<at::Tensor> result{out.detach()};
  for (const at::Tensor& g : torch::autograd::grad({(out * weighting).sum()}, inputs)) result.push_back(g);
  return result;
}

void expect_close_to_aten(std::vector<int64_t> shape, at::ScalarType dtype, double tolerance) {
  const Inputs in = random_inputs(shape, dtype, 11);
  const at::Tensor weighting = at::randn(shape, at::TensorOptions().dtype(dtype));
  const auto expected = value_and_gradients(in.tensors, false, weighting);
  const auto actual = value_and_gradients(in.tensors, true, weighting);
  const char* names[] = {"output",          "linear's gradient", "gate's gradient",
                         "skip's gradient", "weight's gradient", "bias's gradient"};
  for (size_t i = 0; i < expected.size(); ++i) {
    const double error = (actual[i] - expected[i]).abs().max().item<double>();
    const double scale = expected[i].abs().max().item<double>();
    EXPECT_LE(error, tolerance * scale) << names[i] << " of shape " << at::IntArrayRef(shape);
  }
}

TEST(GatedAddNormTest, IsTheAtenOpsInFloatToRoundOff) {
  // Widths below, at and off a multiple of the eight lanes; rows off the 64-row chunk.
  for (int64_t d : {3, 8, 37, 160}) expect_close_to_aten({3, 45, d}, at::kFloat, 2e-5);
}

TEST(GatedAddNormTest, IsTheAtenOpsInDoubleToRoundOff) {
  for (int64_t d : {5, 160}) expect_close_to_aten({130, d}, at::kDouble, 1e-12);
}

TEST(GatedAddNormTest, HandComputedRow) {
  // linear [1, 2], gate logits [0, 0] (sigmoid 1/2), skip [1, 0]: y = [1.5, 1], mean 1.25,
  // variance 1/16, so the normalized row is +-0.25 / sqrt(1/16 + eps); weight [2, 1] and
  // bias [0, 1] give [2n, 1 - n].
  const at::Tensor out = gated_add_norm(at::tensor({1.0, 2.0}), at::tensor({0.0, 0.0}), at::tensor({1.0, 0.0}),
                                        at::tensor({2.0, 1.0}), at::tensor({0.0, 1.0}), kEps);
  const double n = 0.25 / std::sqrt(1.0 / 16 + kEps);
  EXPECT_DOUBLE_EQ(out[0].item<double>(), 2 * n);
  EXPECT_DOUBLE_EQ(out[1].item<double>(), 1 - n);
}

TEST(GatedAddNormTest, SameBitsWithoutGradientAndOnAnyNumberOfThreads) {
  const Inputs in = random_inputs({2, 300, 160}, at::kFloat, 5);
  const at::Tensor weighting = at::randn({2, 300, 160});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const auto one = value_and_gradients(in.tensors, true, weighting);
  at::set_num_threads(3);
  const auto three = value_and_gradients(in.tensors, true, weighting);
  at::Tensor without_gradient;
  {
    at::NoGradGuard no_grad;
    without_gradient = fused(in.tensors);
  }
  at::set_num_threads(threads);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(bitwise_equal(one[i], three[i])) << "result " << i;
  EXPECT_TRUE(bitwise_equal(without_gradient, one[0]));
}

TEST(GatedAddNormTest, ShapesItDoesNotFuseAreTheAtenOps) {
  // A skip that broadcasts over the rows goes to ATen, with ATen's bits.
  std::vector<at::Tensor> t = random_inputs({4, 6}, at::kFloat, 3).tensors;
  t[2] = at::randn({6}).requires_grad_(true);
  EXPECT_TRUE(bitwise_equal(fused(t), unfused(t)));
}

}  // namespace
}  // namespace qtft::model::detail
