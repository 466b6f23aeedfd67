#include "qtft/model/tft_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "qtft/common/error.h"
#include "support/temp_dir.h"

namespace qtft::model {
namespace {

using test::error_message;
using ::testing::HasSubstr;

TftOptions valid() { return TftOptions(4, 5, 2, 64, 8); }

// Runs validate() on options changed by `edit` and returns the UsageError's message.
template <class Edit>
std::string usage_error(Edit edit) {
  TftOptions o = valid();
  edit(o);
  try {
    o.validate();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a qtft::UsageError";
  return "";
}

TEST(TftOptionsTest, DefaultsAreValid) {
  EXPECT_NO_THROW(valid().validate());
  EXPECT_EQ(valid().hidden_size(), 64);
  EXPECT_EQ(valid().attention_heads(), 4);
  EXPECT_EQ(valid().lstm_layers(), 1);
  EXPECT_DOUBLE_EQ(valid().dropout(), 0.1);
  EXPECT_EQ(valid().quantiles(), (std::vector<double>{0.1, 0.5, 0.9}));
}

TEST(TftOptionsTest, ValidationNamesTheFlag) {
  EXPECT_THAT(usage_error([](TftOptions& o) { o.hidden_size(0); }), HasSubstr("--hidden-size"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.attention_heads(0); }), HasSubstr("--attention-heads"));
  const std::string indivisible = usage_error([](TftOptions& o) { o.hidden_size(10).attention_heads(4); });
  EXPECT_THAT(indivisible, HasSubstr("--hidden-size (10)"));
  EXPECT_THAT(indivisible, HasSubstr("--attention-heads (4)"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.lstm_layers(0); }), HasSubstr("--lstm-layers"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.dropout(1.0); }), HasSubstr("--dropout"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.dropout(-0.1); }), HasSubstr("--dropout"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.dropout(std::nan("")); }), HasSubstr("--dropout"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.encoder_length(0); }), HasSubstr("--encoder-length"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.horizon(0); }), HasSubstr("--horizon"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.variable_hidden_size(-1); }), HasSubstr("--variable-hidden-size"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.variable_hidden_size(TftOptions::kMaxHiddenSize + 1); }),
              HasSubstr("--variable-hidden-size"));
}

TEST(TftOptionsTest, VariableHiddenSizeDefaultsToTheHiddenSizeForFewInputs) {
  EXPECT_EQ(valid().hidden_size(64).variable_width(), 64) << "0 stands for the hidden size";
  EXPECT_EQ(valid().hidden_size(64).variable_hidden_size(16).variable_width(), 16);
  EXPECT_EQ(default_variable_hidden_size(160, 9), 160);
  EXPECT_EQ(default_variable_hidden_size(160, kNarrowVariablesFrom - 1), 160);
  EXPECT_EQ(default_variable_hidden_size(160, kNarrowVariablesFrom), kWideVariableHiddenSize);
  EXPECT_EQ(default_variable_hidden_size(160, 220), kWideVariableHiddenSize);
  EXPECT_EQ(default_variable_hidden_size(8, 220), 8) << "never wider than the hidden size";
  // At the hidden size the config has no field, so that files keep their text.
  EXPECT_FALSE(to_json(valid().variable_hidden_size(64)).contains("variable_hidden_size"));
  const auto narrow = to_json(valid().variable_hidden_size(16));
  EXPECT_EQ(narrow.at("variable_hidden_size"), 16);
  EXPECT_EQ(tft_options_from_json(narrow).variable_width(), 16);
}

TEST(TftOptionsTest, QuantilesMustBeSortedNonEmptyAndInsideTheUnitInterval) {
  for (const std::vector<double>& bad : std::vector<std::vector<double>>{
           {}, {0.9, 0.1}, {0.1, 0.5, 0.5}, {0.0, 0.5}, {0.5, 1.0}, {-0.1}, {std::nan("")}}) {
    EXPECT_THAT(usage_error([&](TftOptions& o) { o.quantiles(bad); }), HasSubstr("--quantiles"))
        << "for " << bad.size() << " quantiles";
  }
  EXPECT_NO_THROW(valid().quantiles({0.5}).validate());
  EXPECT_NO_THROW(valid().quantiles({0.02, 0.1, 0.25, 0.5, 0.75, 0.9, 0.98}).validate());
}

TEST(TftOptionsTest, QuantilesMustIncludeTheMedian) {
  // One rule for every command: forecasts, prices and RMSE all read the 0.5 quantile.
  EXPECT_THAT(usage_error([](TftOptions& o) { o.quantiles({0.1, 0.9}); }), HasSubstr("must include 0.5"));
}

TEST(TftOptionsTest, SizesHaveUpperBounds) {
  // A mistyped flag or a tampered model file fails before anything is allocated.
  EXPECT_THAT(usage_error([](TftOptions& o) { o.hidden_size(100000).attention_heads(1); }),
              HasSubstr("--hidden-size must be at most 1024, got 100000"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.lstm_layers(100000); }),
              HasSubstr("--lstm-layers must be at most 8, got 100000"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.encoder_length(1 << 20); }), HasSubstr("--encoder-length"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.horizon(5000); }), HasSubstr("--horizon"));
  EXPECT_THAT(usage_error([](TftOptions& o) { o.hidden_size(128).attention_heads(128); }),
              HasSubstr("--attention-heads"));
  EXPECT_NO_THROW(valid().hidden_size(TftOptions::kMaxHiddenSize).lstm_layers(TftOptions::kMaxLstmLayers).validate());
  EXPECT_THAT(error_message([] { TftOptions(200, 100, 2, 64, 8).validate(); }), HasSubstr("at most 256"));
  EXPECT_THAT(error_message([] { TftOptions(4, 5, 2'000'000, 64, 8).validate(); }), HasSubstr("num_symbols"));
}

TEST(TftOptionsTest, DataSizesThrowPlainErrors) {
  // Not usage errors: no flag sets them, they come from the data.
  EXPECT_THAT(error_message([] { TftOptions(4, 0, 2, 64, 8).validate(); }), HasSubstr("num_known"));
  EXPECT_THAT(error_message([] { TftOptions(-1, 5, 2, 64, 8).validate(); }), HasSubstr("num_observed"));
  EXPECT_THAT(error_message([] { TftOptions(4, 5, 0, 64, 8).validate(); }), HasSubstr("num_symbols"));
  EXPECT_THROW(TftOptions(4, 0, 2, 64, 8).validate(), Error);
  EXPECT_NO_THROW(TftOptions(0, 1, 1, 1, 1).validate());
}

TEST(TftOptionsTest, MedianIndex) {
  EXPECT_EQ(valid().median_index(), 1);
  EXPECT_EQ(valid().quantiles({0.5}).median_index(), 0);
  EXPECT_EQ(valid().quantiles({0.05, 0.25, 0.5, 0.75}).median_index(), 2);
  EXPECT_THROW(valid().quantiles({0.1, 0.9}).median_index(), UsageError);
  EXPECT_THAT(error_message([] { valid().quantiles({0.1, 0.9}).median_index(); }), HasSubstr("--quantiles"));
}

TEST(TftOptionsTest, JsonRoundTripKeepsEveryField) {
  // Every field differs from its default, so a field dropped on either side is caught.
  TftOptions o(3, 7, 11, 48, 6);
  o.hidden_size(24).attention_heads(3).lstm_layers(2).dropout(0.25).quantiles({0.05, 0.5, 0.95});
  o.use_qat(true).weight_bits(4).activation_bits(8).observer_averaging(0.02);

  const nlohmann::json json = to_json(o);
  EXPECT_EQ(json.size(), 14u) << json.dump();
  // Through text, as it travels in a model file's metadata.
  const TftOptions back = tft_options_from_json(nlohmann::json::parse(json.dump()));
  EXPECT_EQ(back.num_observed(), 3);
  EXPECT_EQ(back.num_known(), 7);
  EXPECT_EQ(back.num_symbols(), 11);
  EXPECT_EQ(back.encoder_length(), 48);
  EXPECT_EQ(back.horizon(), 6);
  EXPECT_EQ(back.hidden_size(), 24);
  EXPECT_EQ(back.attention_heads(), 3);
  EXPECT_EQ(back.lstm_layers(), 2);
  EXPECT_EQ(back.dropout(), 0.25);
  EXPECT_EQ(back.quantiles(), (std::vector<double>{0.05, 0.5, 0.95}));
  EXPECT_TRUE(back.use_qat());
  EXPECT_EQ(back.weight_bits(), 4);
  EXPECT_EQ(back.activation_bits(), 8);
  EXPECT_EQ(back.observer_averaging(), 0.02);
  EXPECT_EQ(to_json(back), json);
}

TEST(TftOptionsTest, JsonErrorsNameTheField) {
  nlohmann::json json = to_json(valid());
  json.erase("lstm_layers");
  EXPECT_THAT(error_message([&] { tft_options_from_json(json); }), HasSubstr("'lstm_layers'"));
  json = to_json(valid());
  json["quantiles"] = "0.5";
  EXPECT_THAT(error_message([&] { tft_options_from_json(json); }), HasSubstr("'quantiles'"));
  EXPECT_THROW(tft_options_from_json(nlohmann::json::array()), Error);
}

}  // namespace
}  // namespace qtft::model
