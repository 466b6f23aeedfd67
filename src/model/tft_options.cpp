#include "qtft/model/tft_options.h"
#include "qtft/quant/quant_params.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "qtft/common/error.h"

namespace qtft::model {
namespace {

std::string quantile_list(const std::vector<double>& quantiles) {
  std::string out;
  for (double q : quantiles) out += (out.empty() ? "" : ",") + std::to_string(q);
  return out;
}

}  // namespace

TftOptions::TftOptions(int64_t num_observed, int64_t num_known, int64_t num_symbols, int64_t encoder_length,
                       int64_t horizon)
    : num_observed_(num_observed),
      num_known_(num_known),
      num_symbols_(num_symbols),
      encoder_length_(encoder_length),
      horizon_(horizon) {}

void TftOptions::validate() const {
  // Sizes that come from the data: a user cannot pass them, so no flag is named.
  if (num_observed_ < 0)
    throw Error("model options: num_observed must not be negative, got " + std::to_string(num_observed_));
  if (num_known_ < 1) {
    throw Error("model options: num_known must be at least 1 (the decoder has no other input), got " +
                std::to_string(num_known_));
  }
  if (num_symbols_ < 1)
    throw Error("model options: num_symbols must be at least 1, got " + std::to_string(num_symbols_));
  // Upper bounds: far above any real configuration, low enough that a mistyped flag or a
  // tampered model file fails here instead of allocating until the machine gives up.
  if (num_observed_ + num_known_ > kMaxInputs) {
    throw Error("model options: " + std::to_string(num_observed_ + num_known_) + " real inputs, at most " +
                std::to_string(kMaxInputs) + " are supported");
  }
  if (num_static_ < 0 || num_static_ > kMaxInputs)
    throw Error("model options: num_static must be in [0, " + std::to_string(kMaxInputs) + "], got " +
                std::to_string(num_static_));
  for (const auto& [name, count, categories] :
       {std::tuple{"observed", num_observed_, &observed_categories_},
        std::tuple{"known", num_known_, &known_categories_}, std::tuple{"static", num_static_, &static_categories_}}) {
    if (static_cast<int64_t>(categories->size()) > count) {
      throw Error(std::string("model options: ") + std::to_string(categories->size()) + " " + name +
                  " categoricals, but only " + std::to_string(count) + " " + name + " inputs");
    }
    for (int64_t rows : *categories) {
      if (rows < 1 || rows > kMaxCategories) {
        throw Error(std::string("model options: a ") + name + " categorical of " + std::to_string(rows) +
                    " embedding rows; each has 1 to " + std::to_string(kMaxCategories));
      }
    }
  }
  if (num_symbols_ > kMaxSymbols) {
    throw Error("model options: num_symbols must be at most " + std::to_string(kMaxSymbols) + ", got " +
                std::to_string(num_symbols_));
  }
  auto at_most = [](int64_t value, int64_t max, const char* flag) {
    if (value > max) {
      throw UsageError(std::string(flag) + " must be at most " + std::to_string(max) + ", got " +
                       std::to_string(value));
    }
  };
  at_most(encoder_length_, kMaxEncoderLength, "--encoder-length");
  at_most(horizon_, kMaxHorizon, "--horizon");
  at_most(hidden_size_, kMaxHiddenSize, "--hidden-size");
  at_most(variable_hidden_size_, kMaxHiddenSize, "--variable-hidden-size");
  at_most(attention_heads_, kMaxAttentionHeads, "--attention-heads");
  at_most(lstm_layers_, kMaxLstmLayers, "--lstm-layers");
  at_most(static_cast<int64_t>(quantiles_.size()), kMaxQuantiles, "the number of --quantiles");

  if (encoder_length_ < 1)
    throw UsageError("--encoder-length must be at least 1, got " + std::to_string(encoder_length_));
  if (horizon_ < 1) throw UsageError("--horizon must be at least 1, got " + std::to_string(horizon_));
  if (hidden_size_ < 1) throw UsageError("--hidden-size must be at least 1, got " + std::to_string(hidden_size_));
  if (variable_hidden_size_ < 0) {
    throw UsageError("--variable-hidden-size must be at least 1 (or 0 for the default), got " +
                     std::to_string(variable_hidden_size_));
  }
  if (attention_heads_ < 1) {
    throw UsageError("--attention-heads must be at least 1, got " + std::to_string(attention_heads_));
  }
  if (hidden_size_ % attention_heads_ != 0) {
    throw UsageError("--hidden-size (" + std::to_string(hidden_size_) + ") must be divisible by --attention-heads (" +
                     std::to_string(attention_heads_) + ")");
  }
  if (lstm_layers_ < 1) throw UsageError("--lstm-layers must be at least 1, got " + std::to_string(lstm_layers_));
  if (use_qat_) {
    quant::weight_range(weight_bits_);          // throws naming --weight-bits
    quant::activation_range(activation_bits_);  // throws naming --activation-bits
    if (!(observer_averaging_ > 0 && observer_averaging_ <= 1)) {
      throw UsageError("the observer averaging constant must be in (0, 1]");
    }
  }
  // Written as a negation so that NaN fails too.
  if (!(dropout_ >= 0.0 && dropout_ < 1.0)) {
    throw UsageError("--dropout must be in [0, 1), got " + std::to_string(dropout_));
  }
  if (quantiles_.empty()) throw UsageError("--quantiles must list at least one quantile");
  for (size_t i = 0; i < quantiles_.size(); ++i) {
    const double q = quantiles_[i];
    if (!(q > 0.0 && q < 1.0)) {
      throw UsageError("--quantiles must lie strictly between 0 and 1, got " + std::to_string(q));
    }
    if (i > 0 && !(quantiles_[i - 1] < q)) {
      throw UsageError("--quantiles must be sorted in increasing order without repeats, got " +
                       quantile_list(quantiles_));
    }
  }
  median_index();  // forecasts, prices and the point metrics all read the median
}

int64_t default_variable_hidden_size(int64_t hidden_size, int64_t time_varying_inputs) {
  if (time_varying_inputs < kNarrowVariablesFrom) return hidden_size;
  return std::min(hidden_size, kWideVariableHiddenSize);
}

int64_t TftOptions::median_index() const {
  for (size_t i = 0; i < quantiles_.size(); ++i) {
    // Quantiles come from text or JSON, so 0.5 is exact; the tolerance only guards arithmetic.
    if (std::abs(quantiles_[i] - 0.5) < 1e-12) return static_cast<int64_t>(i);
  }
  throw UsageError("--quantiles must include 0.5 for the point forecast, got " + quantile_list(quantiles_));
}

nlohmann::json to_json(const TftOptions& o) {
  nlohmann::json out{{"num_observed", o.num_observed()},
                     {"num_known", o.num_known()},
                     {"num_symbols", o.num_symbols()},
                     {"encoder_length", o.encoder_length()},
                     {"horizon", o.horizon()},
                     {"hidden_size", o.hidden_size()},
                     {"attention_heads", o.attention_heads()},
                     {"lstm_layers", o.lstm_layers()},
                     {"dropout", o.dropout()},
                     {"quantiles", o.quantiles()},
                     {"use_qat", o.use_qat()},
                     {"weight_bits", o.weight_bits()},
                     {"activation_bits", o.activation_bits()},
                     {"observer_averaging", o.observer_averaging()}};
  // Only with declared statics or categoricals, so that other models' configs keep their text.
  if (o.num_static() > 0) out["num_static"] = o.num_static();
  if (!o.observed_categories().empty()) out["observed_categories"] = o.observed_categories();
  if (!o.known_categories().empty()) out["known_categories"] = o.known_categories();
  if (!o.static_categories().empty()) out["static_categories"] = o.static_categories();
  // Only when narrower than the hidden size, for the same reason.
  if (o.variable_width() != o.hidden_size()) out["variable_hidden_size"] = o.variable_width();
  return out;
}

TftOptions tft_options_from_json(const nlohmann::json& json) {
  // Every field is required: a model file missing one was not written by qtft, and a
  // default would silently build a model that does not match the stored weights.
  const char* field = "";
  try {
    auto get_int = [&](const char* name) {
      field = name;
      return json.at(name).get<int64_t>();
    };
    TftOptions o(get_int("num_observed"), get_int("num_known"), get_int("num_symbols"), get_int("encoder_length"),
                 get_int("horizon"));
    o.hidden_size(get_int("hidden_size"));
    o.attention_heads(get_int("attention_heads"));
    o.lstm_layers(get_int("lstm_layers"));
    field = "dropout";
    o.dropout(json.at(field).get<double>());
    field = "quantiles";
    o.quantiles(json.at(field).get<std::vector<double>>());
    // Files written before QAT existed have no QAT fields: they are FP32 models.
    if (json.contains("use_qat")) {
      field = "use_qat";
      o.use_qat(json.at(field).get<bool>());
      o.weight_bits(get_int("weight_bits"));
      o.activation_bits(get_int("activation_bits"));
      field = "observer_averaging";
      o.observer_averaging(json.at(field).get<double>());
    }
    // Files written before --variable-hidden-size, and those at the hidden size, have none.
    if (json.contains("variable_hidden_size")) o.variable_hidden_size(get_int("variable_hidden_size"));
    // Files written before declared statics and categoricals have none.
    if (json.contains("num_static")) o.num_static(get_int("num_static"));
    for (const char* name : {"observed_categories", "known_categories", "static_categories"}) {
      if (!json.contains(name)) continue;
      field = name;
      auto rows = json.at(name).get<std::vector<int64_t>>();
      if (name[0] == 'o')
        o.observed_categories(std::move(rows));
      else if (name[0] == 'k')
        o.known_categories(std::move(rows));
      else
        o.static_categories(std::move(rows));
    }
    return o;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("model config: field '") + field + "' is missing or malformed: " + e.what());
  }
}

}  // namespace qtft::model
