#include "qtft/model/variable_selection_network.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace qtft::model {
namespace {

VariableSelectionNetwork make_vsn(int64_t num_inputs, int64_t hidden, int64_t context_size) {
  VariableSelectionNetwork vsn(
      VariableSelectionNetworkOptions(num_inputs, hidden).dropout(0.2).context_size(context_size));
  vsn->eval();
  return vsn;
}

TEST(VariableSelectionNetworkTest, TemporalShapesAndWeightsSumToOne) {
  auto vsn = make_vsn(4, 8, 8);
  auto [output, weights] = vsn(at::randn({2, 3, 4, 8}), at::randn({2, 8}));
  EXPECT_EQ(output.sizes(), (std::vector<int64_t>{2, 3, 8}));
  EXPECT_EQ(weights.sizes(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_TRUE(at::allclose(weights.sum(-1), at::ones({2, 3})));
  EXPECT_TRUE((weights > 0).all().item<bool>());
}

TEST(VariableSelectionNetworkTest, StaticShapesAndWeightsSumToOne) {
  auto vsn = make_vsn(3, 6, 0);
  auto [output, weights] = vsn(at::randn({5, 3, 6}));
  EXPECT_EQ(output.sizes(), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(weights.sizes(), (std::vector<int64_t>{5, 3}));
  EXPECT_TRUE(at::allclose(weights.sum(-1), at::ones({5})));
}

TEST(VariableSelectionNetworkTest, OutputIsTheWeightedSumOfPerVariableGrns) {
  auto vsn = make_vsn(3, 4, 4);
  const at::Tensor x = at::randn({2, 5, 3, 4});
  const at::Tensor c = at::randn({2, 4});
  auto [output, weights] = vsn(x, c);

  // Recomputed from the submodules: softmax over the flattened GRN, then sum_i w_i GRN_i(x_i).
  const at::Tensor expected_weights = at::softmax(vsn->flattened_grn(x.reshape({2, 5, 12}), c), -1);
  EXPECT_TRUE(at::allclose(weights, expected_weights));
  at::Tensor expected = at::zeros({2, 5, 4});
  for (int64_t i = 0; i < 3; ++i) {
    auto& grn = vsn->variable_grns->at<GatedResidualNetworkImpl>(static_cast<size_t>(i));
    expected = expected + expected_weights.select(-1, i).unsqueeze(-1) * grn.forward(x.select(2, i));
  }
  EXPECT_TRUE(at::allclose(output, expected, 1e-5, 1e-6));
}

TEST(VariableSelectionNetworkTest, ContextSteersTheSelection) {
  auto vsn = make_vsn(3, 4, 4);
  const at::Tensor x = at::randn({1, 3, 4});
  const at::Tensor w1 = vsn(x, at::randn({1, 4})).weights;
  const at::Tensor w2 = vsn(x, at::randn({1, 4})).weights;
  EXPECT_FALSE(at::allclose(w1, w2));
}

TEST(VariableSelectionNetworkTest, SingleInputHasUnitWeightAndNoSelector) {
  auto vsn = make_vsn(1, 4, 0);
  EXPECT_FALSE(vsn->flattened_grn);
  const at::Tensor x = at::randn({3, 1, 4});
  auto [output, weights] = vsn(x);
  EXPECT_TRUE(at::equal(weights, at::ones({3, 1})));
  EXPECT_TRUE(at::allclose(output, vsn->variable_grns->at<GatedResidualNetworkImpl>(0).forward(x.select(1, 0))));
}

TEST(VariableSelectionNetworkTest, ParameterNamesFollowThePaper) {
  auto vsn = make_vsn(2, 4, 4);
  const auto params = vsn->named_parameters();
  for (const char* name : {"flattened_grn.fc1.linear.weight", "flattened_grn.context_projection.linear.weight",
                           "flattened_grn.skip_projection.linear.weight", "variable_grns.0.fc1.linear.weight",
                           "variable_grns.1.gate.gate_fc.linear.bias"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
  // Flattened GRN maps n*hidden -> n; per-variable GRNs are hidden -> hidden.
  EXPECT_EQ(params["flattened_grn.fc1.linear.weight"].sizes(), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(params["flattened_grn.gate.fc.linear.weight"].sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(params["variable_grns.0.fc1.linear.weight"].sizes(), (std::vector<int64_t>{4, 4}));
}

TEST(VariableSelectionNetworkTest, WrongInputShapeSaysWhatWasExpected) {
  auto vsn = make_vsn(3, 4, 0);
  const std::string message = test::error_message([&] { vsn(at::randn({2, 2, 4})); });
  EXPECT_THAT(message, ::testing::HasSubstr("expected inputs [..., 3, 4]"));
  EXPECT_THAT(message, ::testing::HasSubstr("[2, 2, 4]"));
}

}  // namespace
}  // namespace qtft::model
