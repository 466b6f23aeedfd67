// Finite-difference checks of the autograd gradients, in double precision with dropout 0:
// they catch a forward that is not the function its gradient belongs to (a detach, an
// in-place edit, a mask applied on one side only).

#include <ATen/ops/arange.h>
#include <ATen/ops/randn.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "qtft/model/gated_residual_network.h"
#include "qtft/model/interpretable_attention.h"
#include "qtft/model/tft.h"
#include "qtft/model/variable_selection_network.h"

namespace qtft::model {
namespace {

constexpr double kEps = 1e-6;
constexpr double kTolerance = 1e-6;

at::Tensor random_double(at::IntArrayRef shape) { return at::randn(shape, at::kDouble); }

// Compares d f / d target from autograd with central differences (f(t + eps) - f(t - eps)) / 2 eps,
// element by element. f returns a scalar; target is an input or a parameter that f reads.
void check_gradient(const std::function<at::Tensor()>& f, const at::Tensor& target, const std::string& what) {
  ASSERT_TRUE(target.requires_grad()) << what;
  ASSERT_TRUE(target.is_contiguous()) << what;
  const at::Tensor analytic = torch::autograd::grad({f()}, {target})[0];
  c10::NoGradGuard no_grad;
  double* data = target.data_ptr<double>();
  const int64_t n = target.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double original = data[i];
    data[i] = original + kEps;
    const double up = f().item<double>();
    data[i] = original - kEps;
    const double down = f().item<double>();
    data[i] = original;
    const double numeric = (up - down) / (2 * kEps);
    const double autograd = analytic.reshape(-1)[i].item<double>();
    EXPECT_NEAR(autograd, numeric, kTolerance * std::max(1.0, std::abs(numeric))) << what << " element " << i;
  }
}

// A scalar that weights every output element differently, so no error can cancel out.
std::function<at::Tensor()> weighted_sum(std::function<at::Tensor()> output, at::IntArrayRef shape) {
  const at::Tensor weights = random_double(shape);
  return [output = std::move(output), weights] { return (output() * weights).sum(); };
}

TEST(GradientCheckTest, GatedResidualNetworkWithContext) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(3, 4, 2).context_size(2));
  grn->to(at::kDouble);
  const at::Tensor a = random_double({2, 3, 3}).requires_grad_();
  const at::Tensor c = random_double({2, 2}).requires_grad_();
  const auto f = weighted_sum([&] { return grn(a, c); }, {2, 3, 2});
  check_gradient(f, a, "input");
  check_gradient(f, c, "context");
  check_gradient(f, grn->fc1->linear->weight, "fc1.weight");
  check_gradient(f, grn->context_projection->linear->weight, "context_projection.weight");
  check_gradient(f, grn->gate->gate_fc->linear->bias, "gate.gate_fc.bias");
  check_gradient(f, grn->skip_projection->linear->weight, "skip_projection.weight");
  check_gradient(f, grn->layer_norm->weight, "layer_norm.weight");
}

TEST(GradientCheckTest, VariableSelectionNetwork) {
  VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(3, 4).context_size(4));
  vsn->to(at::kDouble);
  const at::Tensor x = random_double({2, 2, 3, 4}).requires_grad_();
  const at::Tensor c = random_double({2, 4}).requires_grad_();
  // Both outputs: the weights carry the selection's own gradient.
  const at::Tensor output_weights = random_double({2, 2, 4}), selection_weights = random_double({2, 2, 3});
  const auto f = [&] {
    auto [output, weights] = vsn(x, c);
    return (output * output_weights).sum() + (weights * selection_weights).sum();
  };
  check_gradient(f, x, "input");
  check_gradient(f, c, "context");
  check_gradient(f, vsn->flattened_grn->fc1->linear->weight, "flattened_grn.fc1.weight");
  check_gradient(f, vsn->variable_grns->at<GatedResidualNetworkImpl>(1).fc2->linear->weight,
                 "variable_grns.1.fc2.weight");
}

TEST(GradientCheckTest, InterpretableAttentionWithCausalMask) {
  constexpr int64_t encoder = 3, horizon = 2;
  InterpretableMultiHeadAttention attention(InterpretableMultiHeadAttentionOptions(4, 2));
  attention->to(at::kDouble);
  const at::Tensor x = random_double({2, encoder + horizon, 4}).requires_grad_();
  const at::Tensor mask = decoder_causal_mask(encoder, horizon, at::kCPU);
  const at::Tensor output_weights = random_double({2, horizon, 4}), attention_weights = random_double({2, horizon, 5});
  const auto f = [&] {
    auto [output, weights] = attention(x.narrow(1, encoder, horizon), x, x, mask);
    return (output * output_weights).sum() + (weights * attention_weights).sum();
  };
  check_gradient(f, x, "input");
  check_gradient(f, attention->q_proj->linear->weight, "q_proj.weight");
  check_gradient(f, attention->k_proj->linear->weight, "k_proj.weight");
  check_gradient(f, attention->v_proj->linear->weight, "v_proj.weight");
  check_gradient(f, attention->out_proj->linear->bias, "out_proj.bias");
}

TEST(GradientCheckTest, WholeModelInputs) {
  TftOptions options(2, 2, 2, 4, 2);
  options.hidden_size(4).attention_heads(2).dropout(0.0);
  TemporalFusionTransformer model(options);
  model->to(at::kDouble);
  const at::Tensor observed = random_double({2, 4, 2}).requires_grad_();
  const at::Tensor known = random_double({2, 6, 2}).requires_grad_();
  const at::Tensor symbol = at::arange(2, at::kLong);
  const auto f = weighted_sum([&] { return model(observed, known, symbol).quantiles; }, {2, 2, 3});
  check_gradient(f, observed, "observed");
  check_gradient(f, known, "known");
  check_gradient(f, model->lstm_encoder->named_parameters()["weight_hh_l0"], "lstm_encoder.weight_hh_l0");
}

}  // namespace
}  // namespace qtft::model
