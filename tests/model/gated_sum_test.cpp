// The fused gated residual sum against the unfused expression it replaces, residual +
// sigmoid(gate_logits) * value: the same bits forward and backward in FP32 and with bf16
// gate and value (the products under --precision bf16) beside an FP32 residual, including
// the transposed residual of the grouped variables and rows that are not contiguous.
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "qtft/model/detail/gated_sum.h"

namespace qtft::model::detail {
namespace {

struct Operands {
  at::Tensor residual, gate_logits, value;
};

// A [variables, rows, width] gate and value of `type` and an FP32 residual given as the
// transposed view of a [rows, variables, width] tensor, as the grouped variables pass it.
// Logits up to about +-12 reach sigmoid's flat ends, where its gradient rounds hardest.
Operands make_operands(at::ScalarType type, uint64_t seed) {
  torch::manual_seed(seed);
  const auto options = at::TensorOptions().dtype(at::kFloat);
  return {at::randn({37, 5, 24}, options).transpose(0, 1).requires_grad_(),
          (at::randn({5, 37, 24}, options) * 4).to(type).requires_grad_(),
          at::randn({5, 37, 24}, options).to(type).requires_grad_()};
}

struct Result {
  at::Tensor out, residual_grad, gate_grad, value_grad;
  std::string backward_node;
};

Result run(const Operands& in, bool fused, const at::Tensor& upstream) {
  const std::vector<at::Tensor> leaves{in.residual.detach().requires_grad_(), in.gate_logits.detach().requires_grad_(),
                                       in.value.detach().requires_grad_()};
  const at::Tensor out = fused ? gated_residual_sum(leaves[0], leaves[1], leaves[2])
                               : unfused_gated_residual_sum(leaves[0], leaves[1], leaves[2]);
  const std::string node = out.grad_fn() ? out.grad_fn()->name() : "";
  const auto grads = torch::autograd::grad({out}, leaves, {upstream});
  return {out.detach(), grads[0], grads[1], grads[2], node};
}

void expect_same_bits(const Result& fused, const Result& unfused) {
  EXPECT_EQ(fused.out.scalar_type(), unfused.out.scalar_type());
  EXPECT_TRUE(at::equal(fused.out, unfused.out));
  EXPECT_TRUE(at::equal(fused.residual_grad, unfused.residual_grad));
  EXPECT_EQ(fused.gate_grad.scalar_type(), unfused.gate_grad.scalar_type());
  EXPECT_TRUE(at::equal(fused.gate_grad, unfused.gate_grad));
  EXPECT_TRUE(at::equal(fused.value_grad, unfused.value_grad));
}

class GatedSum : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(GatedSum, ForwardAndGradientsAreTheUnfusedExpressionsBits) {
  const Operands in = make_operands(GetParam(), 11);
  const at::Tensor upstream = at::randn({5, 37, 24});
  const Result fused = run(in, true, upstream), unfused = run(in, false, upstream);
  // The fused kernel ran, not the fallback.
  EXPECT_NE(fused.backward_node.find("GatedResidualSum"), std::string::npos) << fused.backward_node;
  EXPECT_EQ(fused.out.scalar_type(), at::kFloat);
  expect_same_bits(fused, unfused);
}

TEST_P(GatedSum, RowsThatAreNotContiguousGiveTheSameBits) {
  // Gate and value whose last dimension strides over memory: the element-by-element path.
  Operands in = make_operands(GetParam(), 12);
  in.gate_logits = in.gate_logits.detach().transpose(1, 2).contiguous().transpose(1, 2);
  in.value = in.value.detach().transpose(1, 2).contiguous().transpose(1, 2);
  ASSERT_FALSE(in.gate_logits.is_contiguous());
  const at::Tensor upstream = at::randn({24, 37, 5}).permute({2, 1, 0});  // a strided gradient as well
  expect_same_bits(run(in, true, upstream), run(in, false, upstream));
}

TEST_P(GatedSum, WithoutGradientTheForwardIsTheSame) {
  const Operands in = make_operands(GetParam(), 13);
  const c10::NoGradGuard no_grad;
  const at::Tensor fused = gated_residual_sum(in.residual, in.gate_logits, in.value);
  EXPECT_FALSE(fused.requires_grad());
  EXPECT_TRUE(at::equal(fused, unfused_gated_residual_sum(in.residual, in.gate_logits, in.value)));
}

INSTANTIATE_TEST_SUITE_P(Types, GatedSum, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

TEST(GatedSumFallback, OtherTypesAndShapesTakeTheUnfusedExpression) {
  torch::manual_seed(14);
  // Double, and a residual broadcast over the rows: the unfused expression's node.
  const at::Tensor d = at::randn({4, 6}, at::kDouble).requires_grad_();
  EXPECT_EQ(gated_residual_sum(d, d * 2, d * 3).grad_fn()->name(), "AddBackward0");
  const at::Tensor row = at::randn({6}).requires_grad_(), g = at::randn({4, 6}).requires_grad_();
  const at::Tensor out = gated_residual_sum(row, g, g);
  EXPECT_EQ(out.grad_fn()->name(), "AddBackward0");
  EXPECT_TRUE(at::equal(out, unfused_gated_residual_sum(row, g, g)));
}

}  // namespace
}  // namespace qtft::model::detail
