#include "qtft/model/tft.h"

#include <ATen/Context.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <iostream>
#include <string>
#include <vector>

#include "qtft/common/error.h"
#include "support/temp_dir.h"

namespace qtft::model {
namespace {

struct Inputs {
  at::Tensor observed, known, symbol;
};

Inputs random_inputs(const TftOptions& o, int64_t batch) {
  const int64_t l = o.encoder_length(), h = o.horizon();
  return {at::randn({batch, l, o.num_observed()}), at::randn({batch, l + h, o.num_known()}),
          at::arange(batch, at::kLong).remainder(o.num_symbols())};
}

TftOutput run(TemporalFusionTransformer& model, const Inputs& in) { return model(in.observed, in.known, in.symbol); }

void expect_rows_sum_to_one(const at::Tensor& weights, const std::string& what) {
  const at::Tensor sums = weights.sum(-1);
  EXPECT_TRUE(at::allclose(sums, at::ones_like(sums), 1e-5, 1e-6)) << what;
}

TEST(TftTest, OutputShapesAcrossConfigurations) {
  for (int64_t hidden : {8, 16}) {
    for (int64_t heads : {1, 2, 4}) {
      for (int64_t layers : {1, 2}) {
        for (const std::vector<double>& quantiles : {std::vector<double>{0.5}, std::vector<double>{0.1, 0.5, 0.9}}) {
          for (int64_t horizon : {1, 3}) {
            for (int64_t batch : {1, 3}) {
              SCOPED_TRACE(testing::Message()
                           << "hidden " << hidden << " heads " << heads << " layers " << layers << " quantiles "
                           << quantiles.size() << " horizon " << horizon << " batch " << batch);
              constexpr int64_t l = 5, o_in = 2, k_in = 3;
              TftOptions options(o_in, k_in, 2, l, horizon);
              options.hidden_size(hidden).attention_heads(heads).lstm_layers(layers).quantiles(quantiles);
              TemporalFusionTransformer model(options);
              model->eval();
              const TftOutput out = run(model, random_inputs(options, batch));
              const auto q = static_cast<int64_t>(quantiles.size());
              EXPECT_EQ(out.quantiles.sizes(), (std::vector<int64_t>{batch, horizon, q}));
              EXPECT_EQ(out.static_weights.sizes(), (std::vector<int64_t>{batch, 1}));
              EXPECT_EQ(out.encoder_weights.sizes(), (std::vector<int64_t>{batch, l, o_in + k_in}));
              EXPECT_EQ(out.decoder_weights.sizes(), (std::vector<int64_t>{batch, horizon, k_in}));
              EXPECT_EQ(out.attention.sizes(), (std::vector<int64_t>{batch, horizon, l + horizon}));
              EXPECT_TRUE(out.quantiles.isfinite().all().item<bool>());
              expect_rows_sum_to_one(out.static_weights, "static");
              expect_rows_sum_to_one(out.encoder_weights, "encoder");
              expect_rows_sum_to_one(out.decoder_weights, "decoder");
              expect_rows_sum_to_one(out.attention, "attention");
            }
          }
        }
      }
    }
  }
}

TEST(TftTest, EveryParameterGetsAGradient) {
  // Two LSTM layers and several heads so that every kind of submodule is present; three
  // symbols in the batch so that every embedding row is used.
  TftOptions options(2, 3, 3, 6, 4);
  options.hidden_size(8).attention_heads(2).lstm_layers(2).dropout(0.1);
  TemporalFusionTransformer model(options);
  model->train();
  run(model, random_inputs(options, 3)).quantiles.sum().backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().max().item<double>(), 0.0) << p.key();
  }
}

TEST(TftTest, EvalIsDeterministicAndTrainingUsesDropout) {
  TftOptions options(2, 3, 2, 6, 4);
  options.hidden_size(8).attention_heads(2).dropout(0.3);
  TemporalFusionTransformer model(options);
  const Inputs in = random_inputs(options, 3);
  model->eval();
  EXPECT_TRUE(at::equal(run(model, in).quantiles, run(model, in).quantiles));
  model->train();
  EXPECT_FALSE(at::equal(run(model, in).quantiles, run(model, in).quantiles));
}

// Without gradients the encoder runs as one LSTM call instead of the training's time chunks
// (5 chunks of 4 steps here, two layers); the forecasts agree to float rounding.
TEST(TftTest, ForecastsWithoutGradientsMatchTheChunkedEncoder) {
  TftOptions options(2, 3, 2, 20, 4);
  options.hidden_size(8).attention_heads(2).lstm_layers(2).dropout(0.3);
  TemporalFusionTransformer model(options);
  model->eval();
  const Inputs in = random_inputs(options, 3);
  const at::Tensor chunked = run(model, in).quantiles.detach();
  at::Tensor whole;
  {
    c10::NoGradGuard no_grad;
    whole = run(model, in).quantiles;
  }
  EXPECT_TRUE(at::allclose(whole, chunked, 1e-5, 1e-6)) << (whole - chunked).abs().max();
}

TEST(TftTest, SameSeedSameInitialParameters) {
  TftOptions options(2, 3, 2, 6, 4);
  options.hidden_size(8).attention_heads(2);
  at::manual_seed(1234);
  TemporalFusionTransformer a(options);
  at::manual_seed(1234);
  TemporalFusionTransformer b(options);
  at::manual_seed(4321);
  TemporalFusionTransformer c(options);
  const auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  bool any_differs = false;
  for (const auto& p : pa) {
    EXPECT_TRUE(at::equal(p.value(), pb[p.key()])) << p.key();
    any_differs = any_differs || !at::equal(p.value(), pc[p.key()]);
  }
  EXPECT_TRUE(any_differs);
}

TEST(TftTest, FutureKnownInputsDoNotLeakIntoEarlierSteps) {
  TftOptions options(2, 3, 2, 6, 5);
  options.hidden_size(16).attention_heads(4).lstm_layers(2).dropout(0.2);
  TemporalFusionTransformer model(options);
  model->eval();
  const Inputs in = random_inputs(options, 3);
  const TftOutput base = run(model, in);
  for (int64_t j = 0; j < options.horizon(); ++j) {
    Inputs moved = in;
    moved.known = in.known.clone();
    moved.known.select(1, options.encoder_length() + j).add_(at::randn({3, options.num_known()}));
    const TftOutput out = run(model, moved);
    EXPECT_TRUE(at::equal(out.quantiles.narrow(1, 0, j), base.quantiles.narrow(1, 0, j))) << "perturbed step " << j;
    EXPECT_TRUE(at::equal(out.attention.narrow(1, 0, j), base.attention.narrow(1, 0, j))) << "perturbed step " << j;
    EXPECT_FALSE(at::allclose(out.quantiles.narrow(1, j, 1), base.quantiles.narrow(1, j, 1))) << "step " << j;
    EXPECT_TRUE(
        at::equal(out.attention.select(1, j).narrow(-1, options.encoder_length() + j + 1, options.horizon() - j - 1),
                  at::zeros({3, options.horizon() - j - 1})));
  }
  // The past reaches every step.
  Inputs moved = in;
  moved.observed = in.observed.clone();
  moved.observed.select(1, 0).add_(1.0);
  EXPECT_FALSE(at::allclose(run(model, moved).quantiles.narrow(1, 0, 1), base.quantiles.narrow(1, 0, 1)));
}

// Parameters by formula, written from the architecture independently of the code.
int64_t dense(int64_t in, int64_t out) { return in * out + out; }
int64_t glu(int64_t in, int64_t out) { return 2 * dense(in, out); }
int64_t layer_norm(int64_t n) { return 2 * n; }
int64_t grn(int64_t in, int64_t hidden, int64_t out, int64_t context) {
  return dense(in, hidden) + context * hidden + dense(hidden, hidden) + glu(hidden, out) + layer_norm(out) +
         (in != out ? dense(in, out) : 0);
}
int64_t vsn(int64_t n, int64_t hidden, int64_t context) {
  return (n > 1 ? grn(n * hidden, hidden, n, context) : 0) + n * grn(hidden, hidden, hidden, 0);
}
int64_t lstm(int64_t hidden, int64_t layers) { return layers * (8 * hidden * hidden + 8 * hidden); }
int64_t expected_parameters(const TftOptions& o) {
  const int64_t h = o.hidden_size(), d = h / o.attention_heads();
  const int64_t gate_add_norm = glu(h, h) + layer_norm(h);
  return (o.num_observed() + o.num_known()) * dense(1, h) + o.num_symbols() * h    // embeddings
         + vsn(1, h, 0) + 4 * grn(h, h, h, 0)                                      // static encoders
         + vsn(o.num_observed() + o.num_known(), h, h) + vsn(o.num_known(), h, h)  // temporal selection
         + 2 * lstm(h, o.lstm_layers()) + gate_add_norm                            // seq2seq
         + grn(h, h, h, h)                                                         // static enrichment
         + 2 * dense(h, h) + dense(h, d) + dense(d, h) + gate_add_norm             // attention
         + grn(h, h, h, 0) + gate_add_norm + dense(h, static_cast<int64_t>(o.quantiles().size()));
}

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

TEST(TftTest, ParameterCountMatchesTheArchitecture) {
  TftOptions reference(4, 5, 2, 64, 8);  // hidden 64, 4 heads, 1 LSTM layer, 3 quantiles
  const int64_t count = count_parameters(*TemporalFusionTransformer(reference));
  EXPECT_EQ(count, expected_parameters(reference));
  std::cout << "[ INFO     ] parameters at hidden 64, 4 heads, 1 LSTM layer, 3 quantiles, 4 observed, 5 known, "
               "2 symbols: "
            << count << "\n";

  TftOptions other(1, 2, 5, 10, 3);
  other.hidden_size(12).attention_heads(3).lstm_layers(3).quantiles({0.5});
  EXPECT_EQ(count_parameters(*TemporalFusionTransformer(other)), expected_parameters(other));
}

TEST(TftTest, ParameterPathsAreStable) {
  TemporalFusionTransformer model(TftOptions(2, 3, 2, 6, 4).hidden_size(8).attention_heads(2));
  const auto params = model->named_parameters();
  for (const char* name : {"observed_embeddings.0.linear.weight",
                           "known_embeddings.2.linear.bias",
                           "symbol_embedding.weight",
                           "static_vsn.variable_grns.0.fc1.linear.weight",
                           "static_context_variable_selection.fc1.linear.weight",
                           "static_context_enrichment.gate.gate_fc.linear.weight",
                           "static_context_state_h.layer_norm.weight",
                           "static_context_state_c.fc2.linear.bias",
                           "encoder_vsn.flattened_grn.context_projection.linear.weight",
                           "decoder_vsn.variable_grns.2.gate.fc.linear.weight",
                           "lstm_encoder.weight_ih_l0",
                           "lstm_decoder.weight_hh_l0",
                           "post_lstm_gate.glu.fc.linear.weight",
                           "static_enrichment.context_projection.linear.weight",
                           "temporal_attention.q_proj.linear.weight",
                           "temporal_attention.k_proj.linear.weight",
                           "temporal_attention.v_proj.linear.weight",
                           "temporal_attention.out_proj.linear.weight",
                           "post_attention_gate.layer_norm.bias",
                           "positionwise_grn.fc1.linear.weight",
                           "pre_output_gate.glu.gate_fc.linear.bias",
                           "quantile_outputs.output_layer.linear.weight"}) {
    EXPECT_NE(params.find(name), nullptr) << name;
  }
  // One static input: no selector to learn (its softmax would be the constant 1).
  EXPECT_EQ(params.find("static_vsn.flattened_grn.fc1.linear.weight"), nullptr);
}

TEST(TftTest, BadInputsSayWhatWasExpected) {
  TftOptions options(2, 3, 2, 6, 4);
  options.hidden_size(8).attention_heads(2);
  TemporalFusionTransformer model(options);
  const Inputs in = random_inputs(options, 2);
  using ::testing::HasSubstr;
  EXPECT_THAT(test::error_message([&] { model(in.observed.narrow(1, 0, 5), in.known, in.symbol); }),
              HasSubstr("expected observed [B, 6, 2], got [2, 5, 2]"));
  EXPECT_THAT(test::error_message([&] { model(in.observed, in.known.narrow(2, 0, 2), in.symbol); }),
              HasSubstr("expected known [2, 10, 3], got [2, 10, 2]"));
  EXPECT_THAT(test::error_message([&] { model(in.observed, in.known, in.symbol.to(at::kInt)); }),
              HasSubstr("expected symbol int64 [2]"));
  EXPECT_THAT(test::error_message([&] { model(in.observed, in.known, in.symbol + 1); }),
              HasSubstr("symbol ids must be in [0, 2), got values in [1, 2]"));
  EXPECT_THROW(TemporalFusionTransformer(TftOptions(2, 3, 2, 6, 4).hidden_size(10)), UsageError);
  // Inputs on another device than the model (meta stands in for a GPU here): said at once.
  const auto meta = [](const at::Tensor& t) { return at::empty(t.sizes(), t.options().device(at::kMeta)); };
  EXPECT_THAT(test::error_message([&] { model(meta(in.observed), meta(in.known), meta(in.symbol)); }),
              HasSubstr("the model is on cpu and its inputs on meta, meta and meta: move the model"));
}

TEST(TftTest, RunsInDoublePrecision) {
  TftOptions options(2, 3, 2, 6, 4);
  options.hidden_size(8).attention_heads(2);
  TemporalFusionTransformer model(options);
  model->to(at::kDouble);
  model->eval();
  Inputs in = random_inputs(options, 2);
  in.observed = in.observed.to(at::kDouble);
  in.known = in.known.to(at::kDouble);
  EXPECT_EQ(run(model, in).quantiles.scalar_type(), at::kDouble);
}

TEST(TftTest, CudaMatchesCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  TftOptions options(2, 3, 2, 6, 4);
  options.hidden_size(16).attention_heads(4).lstm_layers(2);
  TemporalFusionTransformer model(options);
  model->eval();
  const Inputs in = random_inputs(options, 3);
  const TftOutput cpu = run(model, in);
  model->to(at::kCUDA);
  const TftOutput cuda = model(in.observed.cuda(), in.known.cuda(), in.symbol.cuda());
  EXPECT_TRUE(at::allclose(cuda.quantiles.cpu(), cpu.quantiles, 1e-3, 1e-4));
  EXPECT_TRUE(at::allclose(cuda.attention.cpu(), cpu.attention, 1e-3, 1e-4));
}

}  // namespace
}  // namespace qtft::model
