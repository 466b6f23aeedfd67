// The selection networks' grouped variables against the per-variable modules they replace:
// the same forward (dropout masks and live observers included) and gradients to float
// rounding, and the narrower inputs of --variable-hidden-size. Not bitwise: ATen's batched
// product runs small matrices (under 400 multiply-adds) through a kernel of its own, and
// at a few shapes the batched and single products round apart (seen at 1.5e-8).
#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "qtft/model/variable_selection_network.h"
#include "qtft/quant/qat_settings.h"

namespace qtft::model {
namespace {

constexpr int64_t kInputs = 5, kHidden = 8;
constexpr double kRtol = 1e-5, kAtol = 1e-6;

// A selection network in training mode (dropout on), with QAT's observers when `qat`;
// the same `seed` gives the same parameters.
VariableSelectionNetwork make_vsn(int64_t width, bool qat, uint64_t seed) {
  torch::manual_seed(seed);
  VariableSelectionNetwork vsn(
      VariableSelectionNetworkOptions(kInputs, kHidden).variable_size(width).dropout(0.3).context_size(kHidden));
  if (qat) {
    for (const auto& module : vsn->modules()) {
      if (auto* dense = module->as<DenseImpl>()) dense->enable_qat(quant::QatSettings{});
    }
  }
  vsn->train();
  return vsn;
}

// Runs `vsn` grouped or per variable from the same random state.
VariableSelectionOutput run(VariableSelectionNetwork& vsn, bool grouped, const at::Tensor& x, const at::Tensor& c) {
  torch::manual_seed(11);
  return grouped ? vsn->forward(x, c) : vsn->forward_per_variable(x, c);
}

// A gradient element sums many products; summed in another order it rounds apart by a few
// units in the last place of the largest terms, not of the element: the absolute tolerance
// follows the tensor's largest magnitude (seen: 3.4e-6 on a weight gradient reaching 19.6,
// on an AMD EPYC with AVX-512).
double scaled_atol(const at::Tensor& expected) { return kAtol * std::max(1.0, expected.abs().max().item<double>()); }

class GroupedVariables : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(GroupedVariables, ForwardIsThePerVariableModulesToRounding) {
  const auto [width, qat] = GetParam();
  auto grouped = make_vsn(width, qat, 3), per_variable = make_vsn(width, qat, 3);
  torch::manual_seed(1);
  // Two steps, so that the observers' moving averages move from their first values.
  for (int step = 0; step < 2; ++step) {
    const at::Tensor x = at::randn({3, 6, kInputs, width}), c = at::randn({3, kHidden});
    const auto a = run(grouped, true, x, c), b = run(per_variable, false, x, c);
    EXPECT_TRUE(at::allclose(a.output, b.output, kRtol, kAtol)) << "step " << step;
    EXPECT_TRUE(at::allclose(a.weights, b.weights, kRtol, kAtol)) << "step " << step;
    EXPECT_EQ(a.output.sizes(), (std::vector<int64_t>{3, 6, kHidden}));
  }
  const auto buffers = grouped->named_buffers(), reference = per_variable->named_buffers();
  ASSERT_EQ(buffers.size(), reference.size());
  EXPECT_EQ(qat, buffers.size() > 0);
  for (const auto& b : buffers) {
    const at::Tensor& r = reference[b.key()];
    EXPECT_TRUE(b.value().is_floating_point() ? at::allclose(b.value(), r, kRtol, kAtol) : at::equal(b.value(), r))
        << b.key();
  }
}

TEST_P(GroupedVariables, GradientsAgreeWithThePerVariableModulesToRounding) {
  const auto [width, qat] = GetParam();
  auto grouped = make_vsn(width, qat, 3), per_variable = make_vsn(width, qat, 3);
  torch::manual_seed(2);
  const at::Tensor x = at::randn({3, 6, kInputs, width}), c = at::randn({3, kHidden});
  const at::Tensor r = at::randn({3, 6, kHidden}), s = at::randn({3, 6, kInputs});
  std::vector<at::Tensor> input_grads;
  for (auto* vsn : {&grouped, &per_variable}) {
    const at::Tensor xi = x.clone().requires_grad_();
    const auto out = run(*vsn, vsn == &grouped, xi, c);
    ((out.output * r).sum() + (out.weights * s).sum()).backward();
    input_grads.push_back(xi.grad());
  }
  EXPECT_TRUE(at::allclose(input_grads[0], input_grads[1], kRtol, scaled_atol(input_grads[1])));
  const auto params = grouped->named_parameters(), reference = per_variable->named_parameters();
  for (const auto& p : params) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key() << " got no gradient";
    const at::Tensor& expected = reference[p.key()].grad();
    EXPECT_TRUE(at::allclose(p.value().grad(), expected, kRtol, scaled_atol(expected)))
        << p.key() << ": differs by up to " << (p.value().grad() - expected).abs().max().item<double>();
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<int64_t, bool>>& info) {
  return std::string(std::get<0>(info.param) == kHidden ? "FullWidth" : "Narrow") +
         (std::get<1>(info.param) ? "Qat" : "Fp32");
}

INSTANTIATE_TEST_SUITE_P(Widths, GroupedVariables,
                         ::testing::Combine(::testing::Values(kHidden, int64_t{3}), ::testing::Bool()), case_name);

TEST(GroupedVariablesWidth, NarrowInputsAreProjectedToTheHiddenSize) {
  auto narrow = make_vsn(3, false, 1);
  ASSERT_TRUE(narrow->output_projection);
  EXPECT_EQ(narrow->output_projection->linear->weight.sizes(), (std::vector<int64_t>{kHidden, 3}));
  EXPECT_EQ(narrow->flattened_grn->fc1->linear->weight.sizes(), (std::vector<int64_t>{kHidden, kInputs * 3}));
  EXPECT_EQ(narrow->variable_grns->at<GatedResidualNetworkImpl>(0).fc1->linear->weight.sizes(),
            (std::vector<int64_t>{3, 3}));
  EXPECT_FALSE(make_vsn(kHidden, false, 1)->output_projection) << "no projection at the hidden size";
  EXPECT_THROW(narrow->forward(at::randn({2, kInputs, kHidden})), c10::Error) << "inputs wider than declared";
}

}  // namespace
}  // namespace qtft::model
