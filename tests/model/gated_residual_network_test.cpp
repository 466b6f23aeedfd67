#include "qtft/model/gated_residual_network.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "qtft/model/gated_linear_unit.h"

namespace qtft::model {
namespace {

using test::layer_norm_pair;
using test::literal;
using test::set_values;

void expect_values(const at::Tensor& actual, const std::vector<double>& expected, double tolerance = 1e-6) {
  const at::Tensor flat = actual.detach().to(at::kDouble).reshape({-1});
  ASSERT_EQ(flat.numel(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(flat[static_cast<int64_t>(i)].item<double>(), expected[i], tolerance) << "element " << i;
  }
}

// A gate whose sigmoid is exactly 3/4 on the first output and 1/2 on the second whatever
// the input: zero weights, biases log(3) (sigmoid(log 3) = 3 / (3 + 1)) and 0.
void set_constant_gate(GatedLinearUnit& glu) {
  set_values(glu->gate_fc->linear->weight, {0, 0, 0, 0});
  set_values(glu->gate_fc->linear->bias, {std::log(3.0), 0});
}

TEST(GatedLinearUnitTest, HandComputedValue) {
  GatedLinearUnit glu(2, 2);
  set_values(glu->fc->linear->weight, {1, 2, 3, 4});
  set_values(glu->fc->linear->bias, {0.5, -0.5});
  set_values(glu->gate_fc->linear->weight, {0, 0, 0, 0});
  set_values(glu->gate_fc->linear->bias, {0, std::log(3.0)});
  // x = [1, -1]: fc(x) = [1 - 2 + 0.5, 3 - 4 - 0.5] = [-0.5, -1.5]
  // gate = sigmoid([0, log 3]) = [1/2, 3/4]  ->  GLU = [-0.25, -1.125]
  expect_values(glu(literal({1, -1}, {1, 2})), {-0.25, -1.125});
}

TEST(GateAddNormTest, HandComputedValue) {
  GateAddNorm gan(GateAddNormOptions(2, 2).dropout(0.5));
  gan->eval();  // dropout off: the value must not depend on it in eval mode
  set_values(gan->glu->fc->linear->weight, {1, 2, 3, 4});
  set_values(gan->glu->fc->linear->bias, {0.5, -0.5});
  set_values(gan->glu->gate_fc->linear->weight, {0, 0, 0, 0});
  set_values(gan->glu->gate_fc->linear->bias, {0, std::log(3.0)});
  // GLU([1, -1]) = [-0.25, -1.125] (as above); skip [1, 1] gives [0.75, -0.125];
  // LayerNorm: d = (0.75 + 0.125) / 2 = 0.4375, outputs +-d / sqrt(d^2 + 1e-5).
  expect_values(gan(literal({1, -1}, {1, 2}), literal({1, 1}, {1, 2})), layer_norm_pair(0.75, -0.125));
}

// fc1 = [[1, 0], [0, -1]] + [0, 0.5], fc2 = [[1, 1], [0, 2]] + 0, GLU value path identity,
// gate constant [3/4, 1/2], LayerNorm at its initial unit weight and zero bias.
GatedResidualNetwork hand_set_grn(int64_t context_size) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(2, 2, 2).context_size(context_size));
  set_values(grn->fc1->linear->weight, {1, 0, 0, -1});
  set_values(grn->fc1->linear->bias, {0, 0.5});
  set_values(grn->fc2->linear->weight, {1, 1, 0, 2});
  set_values(grn->fc2->linear->bias, {0, 0});
  set_values(grn->gate->fc->linear->weight, {1, 0, 0, 1});
  set_values(grn->gate->fc->linear->bias, {0, 0});
  set_constant_gate(grn->gate);
  return grn;
}

TEST(GatedResidualNetworkTest, HandComputedValueWithoutContext) {
  GatedResidualNetwork grn = hand_set_grn(0);
  // a = [1, 2]
  // fc1(a) = [1, -2 + 0.5] = [1, -1.5];  ELU -> [1, e] with e = exp(-1.5) - 1
  // fc2    = [1 + e, 2e];                 gated = [3/4 (1 + e), 1/2 * 2e] = [0.75 (1 + e), e]
  // skip + gated = [1 + 0.75 (1 + e), 2 + e], then LayerNorm.
  const double e = std::exp(-1.5) - 1;
  expect_values(grn(literal({1, 2}, {1, 2})), layer_norm_pair(1 + 0.75 * (1 + e), 2 + e));
}

TEST(GatedResidualNetworkTest, ContextIsAddedBeforeTheEluWithoutBias) {
  GatedResidualNetwork grn = hand_set_grn(1);
  ASSERT_TRUE(grn->context_projection);
  EXPECT_FALSE(grn->context_projection->linear->bias.defined());
  set_values(grn->context_projection->linear->weight, {1, 2});
  // a = [1, 2], c = [0.5]: fc1(a) + W_c c = [1, -1.5] + [0.5, 1] = [1.5, -0.5]
  // ELU -> [1.5, e] with e = exp(-0.5) - 1;  fc2 = [1.5 + e, 2e];  gated = [0.75 (1.5 + e), e]
  // skip + gated = [1 + 0.75 (1.5 + e), 2 + e]
  const double e = std::exp(-0.5) - 1;
  expect_values(grn(literal({1, 2}, {1, 2}), literal({0.5}, {1, 1})), layer_norm_pair(1 + 0.75 * (1.5 + e), 2 + e));
}

TEST(GatedResidualNetworkTest, SkipProjectionWhenSizesDiffer) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(3, 2, 2));
  ASSERT_TRUE(grn->skip_projection);
  set_values(grn->fc1->linear->weight, {0, 0, 0, 0, 0, 0});
  set_values(grn->fc1->linear->bias, {0, 0});
  set_values(grn->fc2->linear->weight, {0, 0, 0, 0});
  set_values(grn->fc2->linear->bias, {1, -1});
  set_values(grn->gate->fc->linear->weight, {1, 0, 0, 1});
  set_values(grn->gate->fc->linear->bias, {0, 0});
  set_constant_gate(grn->gate);
  set_values(grn->skip_projection->linear->weight, {1, 0, 0, 0, 0, 1});
  set_values(grn->skip_projection->linear->bias, {0, 0});
  // a = [1, 2, 3]: fc1 = 0, ELU(0) = 0, fc2 = [1, -1], gated = [0.75, -0.5]
  // skip = skip_projection(a) = [1, 3];  sum = [1.75, 2.5]
  expect_values(grn(literal({1, 2, 3}, {1, 3})), layer_norm_pair(1.75, 2.5));
}

// The selector's form: the same function of the parts as forward of their concatenation
// (equal up to float summation order), with and without QAT, and the same gradients.
// Without QAT in double: the LayerNorm's backward over 6 features can magnify float32's
// summation-order differences past 1e-5 (seen in about one run in ten, as the kernels'
// blocking follows the buffers' alignment). QAT's observers take float32 only.
TEST(GatedResidualNetworkTest, ConcatenatedPartsGiveWhatTheConcatenationGives) {
  for (const bool qat : {false, true}) {
    const auto dtype = at::TensorOptions().dtype(qat ? at::kFloat : at::kDouble);
    GatedResidualNetwork grn(GatedResidualNetworkOptions(12, 6, 3).context_size(2));
    grn->to(dtype.dtype().toScalarType());
    if (qat) {
      for (const auto& module : grn->modules(false)) {
        if (auto* dense = module->as<DenseImpl>()) dense->enable_qat(quant::QatSettings{});
      }
    }
    grn->eval();  // frozen observers after one look, so both forms quantize alike
    const std::vector<at::Tensor> parts{at::randn({5, 7, 4}, dtype), at::randn({5, 7, 4}, dtype),
                                        at::randn({5, 7, 4}, dtype)};
    const at::Tensor context = at::randn({5, 2}, dtype);
    if (qat) {
      grn->train();
      grn->forward(at::cat(parts, -1), context);
      grn->eval();
    }
    std::vector<at::Tensor> leaves;
    for (const auto& p : parts) leaves.push_back(p.clone().requires_grad_(true));
    const at::Tensor joined = at::cat(parts, -1).requires_grad_(true);
    const at::Tensor expected = grn->forward(joined, context);
    const at::Tensor actual = grn->forward_concatenated(leaves, context);
    EXPECT_TRUE(at::allclose(actual, expected, 1e-5, 1e-5)) << "qat " << qat;
    // Not the plain sum: the GRN ends in a LayerNorm, whose outputs sum to a constant, so
    // that gradient would be zero but for rounding noise.
    const at::Tensor weights = at::randn(expected.sizes(), dtype);
    (expected * weights).sum().backward();
    (actual * weights).sum().backward();
    EXPECT_TRUE(
        at::allclose(at::cat({leaves[0].grad(), leaves[1].grad(), leaves[2].grad()}, -1), joined.grad(), 1e-5, 1e-5))
        << "qat " << qat;
  }
  GatedResidualNetwork grn(GatedResidualNetworkOptions(8, 4, 2));
  EXPECT_THROW(grn->forward_concatenated({at::randn({2, 4}), at::randn({2, 3})}), c10::Error);
}

TEST(GatedResidualNetworkTest, SubmodulesExistOnlyWhenNeeded) {
  auto names = [](const GatedResidualNetwork& grn) {
    std::vector<std::string> out;
    for (const auto& p : grn->named_parameters()) out.push_back(p.key());
    return out;
  };
  const auto same = names(GatedResidualNetwork(GatedResidualNetworkOptions(4, 3, 4)));
  const auto differ = names(GatedResidualNetwork(GatedResidualNetworkOptions(5, 3, 4).context_size(2)));
  auto has = [](const std::vector<std::string>& v, const std::string& name) {
    return std::find(v.begin(), v.end(), name) != v.end();
  };
  EXPECT_FALSE(has(same, "skip_projection.linear.weight"));
  EXPECT_FALSE(has(same, "context_projection.linear.weight"));
  EXPECT_TRUE(has(differ, "skip_projection.linear.weight"));
  EXPECT_TRUE(has(differ, "context_projection.linear.weight"));
  EXPECT_FALSE(has(differ, "context_projection.linear.bias"));
  for (const char* name : {"fc1.linear.weight", "fc2.linear.bias", "gate.fc.linear.weight", "gate.gate_fc.linear.bias",
                           "layer_norm.weight"}) {
    EXPECT_TRUE(has(same, name)) << name;
  }
}

TEST(GatedResidualNetworkTest, StaticContextBroadcastsOverTime) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(4, 6, 4).context_size(3));
  const at::Tensor a = at::randn({2, 5, 4});
  const at::Tensor c = at::randn({2, 3});
  const at::Tensor out = grn(a, c);
  EXPECT_EQ(out.sizes(), a.sizes());
  // Step 3 alone, with the same context, gives the same row: the context is per sample.
  const at::Tensor step = grn(a.select(1, 3), c);
  EXPECT_TRUE(at::allclose(out.select(1, 3), step, 1e-5, 1e-6));
}

TEST(GatedResidualNetworkTest, ContextMismatchIsAnError) {
  GatedResidualNetwork with(GatedResidualNetworkOptions(2, 2, 2).context_size(1));
  GatedResidualNetwork without(GatedResidualNetworkOptions(2, 2, 2));
  EXPECT_THROW(with(at::randn({1, 2})), c10::Error);
  EXPECT_THROW(without(at::randn({1, 2}), at::randn({1, 1})), c10::Error);
  EXPECT_THROW(without(at::randn({1, 3})), c10::Error);
}

TEST(GatedResidualNetworkTest, DropoutActsOnlyInTraining) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(8, 8, 8).dropout(0.5));
  const at::Tensor a = at::randn({16, 8});
  grn->eval();
  EXPECT_TRUE(at::equal(grn(a), grn(a)));
  grn->train();
  EXPECT_FALSE(at::equal(grn(a), grn(a)));
}

}  // namespace
}  // namespace qtft::model
