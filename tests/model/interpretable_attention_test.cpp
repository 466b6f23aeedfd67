#include "qtft/model/interpretable_attention.h"

#include <ATen/ops/allclose.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/model_test_util.h"

namespace qtft::model {
namespace {

using test::literal;
using test::set_values;

constexpr int64_t kEncoder = 4, kHorizon = 3, kHidden = 8;

InterpretableMultiHeadAttention make_attention(int64_t heads) {
  InterpretableMultiHeadAttention attention(InterpretableMultiHeadAttentionOptions(kHidden, heads).dropout(0.3));
  attention->eval();
  return attention;
}

// Self-attention as the TFT uses it: decoder queries over every position, causally masked.
AttentionOutput attend(InterpretableMultiHeadAttention& attention, const at::Tensor& x) {
  return attention(x.narrow(1, kEncoder, kHorizon), x, x, decoder_causal_mask(kEncoder, kHorizon, x.device()));
}

TEST(InterpretableMultiHeadAttentionTest, CausalMaskValues) {
  // Encoder 2, horizon 2: step 0 (position 2) must not see position 3; step 1 sees all.
  const at::Tensor expected = literal({0, 0, 0, 1, 0, 0, 0, 0}, {2, 4}).to(at::kBool);
  EXPECT_TRUE(at::equal(decoder_causal_mask(2, 2, at::kCPU), expected));
}

TEST(InterpretableMultiHeadAttentionTest, HeadsShareOneValueProjection) {
  auto attention = make_attention(4);  // d_head = 2
  const auto params = attention->named_parameters();
  EXPECT_EQ(params["q_proj.linear.weight"].sizes(), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(params["k_proj.linear.weight"].sizes(), (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(params["v_proj.linear.weight"].sizes(), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(params["v_proj.linear.bias"].sizes(), (std::vector<int64_t>{2}));
  EXPECT_EQ(params["out_proj.linear.weight"].sizes(), (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(params.size(), 8u);  // weight and bias of q, k, v, out: no per-head values
}

TEST(InterpretableMultiHeadAttentionTest, HandComputedSingleHead) {
  // hidden 2, one head (d_head 2), every projection the identity without bias.
  InterpretableMultiHeadAttention attention(InterpretableMultiHeadAttentionOptions(2, 1));
  for (auto* dense : {&attention->q_proj, &attention->k_proj, &attention->v_proj, &attention->out_proj}) {
    set_values((*dense)->linear->weight, {1, 0, 0, 1});
    set_values((*dense)->linear->bias, {0, 0});
  }
  // query [1, 0]; keys = values = [[1, 0], [0, 2]]: scores [1, 0] / sqrt(2);
  // weights [s, 1 - s] with s = sigmoid(1 / sqrt 2); output s [1, 0] + (1 - s) [0, 2].
  const double s = 1 / (1 + std::exp(-1 / std::sqrt(2.0)));
  auto [output, weights] =
      attention(literal({1, 0}, {1, 1, 2}), literal({1, 0, 0, 2}, {1, 2, 2}), literal({1, 0, 0, 2}, {1, 2, 2}));
  EXPECT_TRUE(at::allclose(weights, literal({s, 1 - s}, {1, 1, 2}), 1e-6, 1e-7)) << weights;
  EXPECT_TRUE(at::allclose(output, literal({s, 2 * (1 - s)}, {1, 1, 2}), 1e-6, 1e-7)) << output;
}

TEST(InterpretableMultiHeadAttentionTest, WeightsSumToOneAndRespectTheMask) {
  for (int64_t heads : {1, 2, 4}) {
    auto attention = make_attention(heads);
    auto [output, weights] = attend(attention, at::randn({3, kEncoder + kHorizon, kHidden}));
    EXPECT_EQ(output.sizes(), (std::vector<int64_t>{3, kHorizon, kHidden}));
    EXPECT_EQ(weights.sizes(), (std::vector<int64_t>{3, kHorizon, kEncoder + kHorizon}));
    EXPECT_TRUE(at::allclose(weights.sum(-1), at::ones({3, kHorizon})));
    for (int64_t i = 0; i < kHorizon; ++i) {
      for (int64_t j = 0; j < kHorizon; ++j) {
        const at::Tensor w = weights.select(1, i).select(1, kEncoder + j);
        if (j > i) {
          EXPECT_TRUE((w == 0).all().item<bool>()) << "step " << i << " sees future step " << j;
        } else {
          EXPECT_TRUE((w > 0).all().item<bool>()) << "step " << i << " misses step " << j;
        }
      }
    }
  }
}

TEST(InterpretableMultiHeadAttentionTest, LaterPositionsDoNotChangeEarlierOutputs) {
  auto attention = make_attention(2);
  const at::Tensor x = at::randn({2, kEncoder + kHorizon, kHidden});
  const AttentionOutput base = attend(attention, x);
  for (int64_t j = 0; j < kHorizon; ++j) {
    at::Tensor perturbed = x.clone();
    perturbed.select(1, kEncoder + j).add_(at::randn({2, kHidden}));
    const AttentionOutput moved = attend(attention, perturbed);
    // Masked scores are -inf, so their probability is exactly 0 and earlier rows are unchanged bit for bit.
    EXPECT_TRUE(at::equal(moved.output.narrow(1, 0, j), base.output.narrow(1, 0, j))) << "perturbed step " << j;
    EXPECT_TRUE(at::equal(moved.weights.narrow(1, 0, j), base.weights.narrow(1, 0, j))) << "perturbed step " << j;
    EXPECT_FALSE(at::allclose(moved.output.narrow(1, j, 1), base.output.narrow(1, j, 1))) << "step " << j;
  }
}

TEST(InterpretableMultiHeadAttentionTest, OutputAveragesPerHeadAttentionOverSharedValues) {
  constexpr int64_t heads = 4, d = kHidden / heads;
  auto attention = make_attention(heads);
  const at::Tensor x = at::randn({2, kEncoder + kHorizon, kHidden});
  const at::Tensor mask = decoder_causal_mask(kEncoder, kHorizon, at::kCPU);
  const at::Tensor query = x.narrow(1, kEncoder, kHorizon);
  auto [output, weights] = attend(attention, x);

  // Head by head, as eq. 14-15 write it: H_h = A_h V W_V, then the mean of H_h through W_H.
  const at::Tensor q = attention->q_proj(query), k = attention->k_proj(x), v = attention->v_proj(x);
  at::Tensor head_sum = at::zeros({2, kHorizon, d});
  at::Tensor weight_sum = at::zeros({2, kHorizon, kEncoder + kHorizon});
  for (int64_t h = 0; h < heads; ++h) {
    const at::Tensor scores = at::matmul(q.narrow(-1, h * d, d), k.narrow(-1, h * d, d).transpose(1, 2)) / std::sqrt(d);
    const at::Tensor a = at::softmax(scores.masked_fill(mask, -std::numeric_limits<float>::infinity()), -1);
    head_sum = head_sum + at::matmul(a, v);
    weight_sum = weight_sum + a;
  }
  EXPECT_TRUE(at::allclose(weights, weight_sum / heads, 1e-5, 1e-7));
  EXPECT_TRUE(at::allclose(output, attention->out_proj(head_sum / heads), 1e-5, 1e-6));
}

TEST(InterpretableMultiHeadAttentionTest, BadShapesAreRejected) {
  auto attention = make_attention(2);
  const at::Tensor x = at::randn({2, 5, kHidden});
  EXPECT_THROW(attention(x, x, x.narrow(1, 0, 4)), c10::Error);
  EXPECT_THROW(attention(x, x, x, at::zeros({5, 4}, at::kBool)), c10::Error);
  EXPECT_THROW(attention(x, x, x, at::zeros({5, 5})), c10::Error);  // not bool
  EXPECT_THROW(InterpretableMultiHeadAttention(InterpretableMultiHeadAttentionOptions(6, 4)), c10::Error);
}

}  // namespace
}  // namespace qtft::model
