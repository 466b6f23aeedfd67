// The TFT with declared statics and categoricals: the static selector runs over the symbol
// and the statics, each categorical input has an embedding of its own, and a model without
// them is the one it always was.
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "qtft/common/error.h"
#include "qtft/model/tft.h"
#include "qtft/quant/observers.h"
#include "support/temp_dir.h"

namespace qtft::model {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// 2 observed (1 real, 1 categorical of 4 rows), 5 known (4 reals, 1 categorical of 3 rows),
// 2 statics (1 real, 1 categorical of 2 rows).
TftOptions declared_options() {
  TftOptions o(2, 5, 3, 6, 2);
  o.num_static(2).observed_categories({4}).known_categories({3}).static_categories({2});
  o.hidden_size(8).attention_heads(2).dropout(0.0);
  return o;
}

struct Inputs {
  at::Tensor observed, known, symbol, statics;
};

// Categorical columns hold level indices as floats, as batches do.
Inputs declared_inputs(int64_t batch) {
  const auto o = declared_options();
  const int64_t l = o.encoder_length(), h = o.horizon();
  Inputs in;
  in.observed =
      at::cat({at::randn({batch, l, 1}), at::arange(batch * l).remainder(4).to(at::kFloat).view({batch, l, 1})}, -1);
  in.known = at::cat(
      {at::randn({batch, l + h, 4}), at::arange(batch * (l + h)).remainder(3).to(at::kFloat).view({batch, l + h, 1})},
      -1);
  in.symbol = at::arange(batch, at::kLong).remainder(3);
  in.statics = at::cat({at::randn({batch, 1}), at::arange(batch).remainder(2).to(at::kFloat).view({batch, 1})}, -1);
  return in;
}

TftOutput run(TemporalFusionTransformer& model, const Inputs& in) {
  return model(in.observed, in.known, in.symbol, in.statics);
}

TEST(TftDeclaredInputs, TheStaticSelectorRunsOverTheSymbolAndEveryStatic) {
  at::manual_seed(3);
  TemporalFusionTransformer model(declared_options());
  model->eval();
  const Inputs in = declared_inputs(4);
  const TftOutput out = run(model, in);
  EXPECT_EQ(out.static_weights.sizes(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(out.encoder_weights.sizes(), (std::vector<int64_t>{4, 6, 7}));
  EXPECT_EQ(out.decoder_weights.sizes(), (std::vector<int64_t>{4, 2, 5}));
  // With several statics there is a selector to learn.
  EXPECT_NE(model->named_parameters().find("static_vsn.flattened_grn.fc1.linear.weight"), nullptr);

  // Another level of each categorical changes the forecast.
  for (const auto& [tensor, column] :
       {std::pair{&Inputs::statics, 1}, std::pair{&Inputs::observed, 1}, std::pair{&Inputs::known, 4}}) {
    Inputs other = in;
    other.*tensor = (in.*tensor).clone();
    auto cell = (other.*tensor).select(-1, column);
    cell.copy_((cell + 1).remainder(2));
    EXPECT_FALSE(at::equal(run(model, other).quantiles, out.quantiles)) << "column " << column;
  }
}

TEST(TftDeclaredInputs, EachCategoricalHasItsEmbeddingAndOnlyItsLevelsGetGradients) {
  TemporalFusionTransformer model(declared_options());
  model->train();
  Inputs in = declared_inputs(3);
  in.statics.select(-1, 1).fill_(1.0);  // row 0 of the static categorical is never used
  run(model, in).quantiles.sum().backward();
  const auto params = model->named_parameters();
  for (const char* name :
       {"static_embeddings.0.linear.weight", "observed_categorical_embeddings.0.embedding.weight",
        "known_categorical_embeddings.0.embedding.weight", "static_categorical_embeddings.0.embedding.weight"}) {
    ASSERT_NE(params.find(name), nullptr) << name;
  }
  EXPECT_EQ(params["observed_categorical_embeddings.0.embedding.weight"].size(0), 4);
  const at::Tensor grad = params["static_categorical_embeddings.0.embedding.weight"].grad();
  EXPECT_EQ(grad[0].abs().max().item<double>(), 0.0);
  EXPECT_GT(grad[1].abs().max().item<double>(), 0.0);
}

TEST(TftDeclaredInputs, WithoutThemTheModelHasTodaysModulesOnly) {
  TemporalFusionTransformer model(TftOptions(2, 3, 2, 6, 4).hidden_size(8).attention_heads(2));
  for (const auto& p : model->named_parameters()) {
    EXPECT_THAT(p.key(), Not(HasSubstr("categorical"))) << p.key();
    EXPECT_THAT(p.key(), Not(HasSubstr("static_embeddings"))) << p.key();
  }
  // Its configuration is written as before, and reads back.
  const auto json = to_json(model->options());
  for (const char* key : {"num_static", "observed_categories", "known_categories", "static_categories"})
    EXPECT_FALSE(json.contains(key)) << key;
  const auto declared = to_json(declared_options());
  EXPECT_EQ(declared.at("static_categories"), nlohmann::json::array({2}));
  const auto back = tft_options_from_json(declared);
  EXPECT_EQ(back.num_static(), 2);
  EXPECT_EQ(back.observed_categories(), std::vector<int64_t>{4});
  EXPECT_EQ(back.known_categories(), std::vector<int64_t>{3});
}

TEST(TftDeclaredInputs, QatQuantizesTheTablesAndObservesTheirOutputs) {
  TemporalFusionTransformer model(declared_options().use_qat(true));
  EXPECT_THAT(model->per_channel_quantized_weights(), Contains("known_categorical_embeddings.0.embedding.weight"));
  EXPECT_THAT(model->per_channel_quantized_weights(), Contains("static_categorical_embeddings.0.embedding.weight"));
  std::vector<std::string> observers;
  for (const auto& [name, _] : quant::find_observers(*model)) observers.push_back(name);
  EXPECT_THAT(observers, Contains(HasSubstr("observed_categorical_embeddings.0")));
  EXPECT_THAT(observers, Contains(HasSubstr("static_embeddings.0")));
  model->train();
  const TftOutput out = run(model, declared_inputs(2));
  EXPECT_TRUE(out.quantiles.isfinite().all().item<bool>());
}

TEST(TftDeclaredInputs, BadStaticsAndLevelsSayWhatWasExpected) {
  TemporalFusionTransformer model(declared_options());
  Inputs in = declared_inputs(2);
  EXPECT_THAT(test::error_message([&] { model(in.observed, in.known, in.symbol); }),
              HasSubstr("expected statics [2, 2] of Float, got none"));
  in.observed.select(-1, 1).fill_(4.0);
  EXPECT_THAT(test::error_message([&] { run(model, in); }),
              HasSubstr("CategoricalEmbedding: level indices must be in [0, 4), got values in [4, 4]"));
  EXPECT_THAT(test::error_message([] {
                TftOptions(2, 3, 2, 6, 4).known_categories({2, 2, 2, 2}).validate();
              }),
              HasSubstr("4 known categoricals, but only 3 known inputs"));
}

}  // namespace
}  // namespace qtft::model
