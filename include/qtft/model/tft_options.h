#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace qtft::model {

// The TFT's configuration: sizes that come from the data in the constructor, the
// architecture's knobs chainable (LibTorch style: TftOptions(...).hidden_size(160)).
// Saved into every model file as JSON so that a file alone rebuilds its model.
struct TftOptions {
  TftOptions(int64_t num_observed, int64_t num_known, int64_t num_symbols, int64_t encoder_length, int64_t horizon);

  TORCH_ARG(int64_t, num_observed);  // past-only inputs
  TORCH_ARG(int64_t, num_known);     // inputs known for past and future
  TORCH_ARG(int64_t, num_symbols);   // vocabulary of the symbol, the static categorical every series has
  TORCH_ARG(int64_t, encoder_length);
  TORCH_ARG(int64_t, horizon);
  // Declared static inputs besides the symbol, one value per series.
  TORCH_ARG(int64_t, num_static) = 0;
  // The embedding rows of each categorical input (its levels and an unknown entry). The
  // categoricals are the last inputs of their kind: observed [reals..., categoricals...].
  TORCH_ARG(std::vector<int64_t>, observed_categories) = std::vector<int64_t>{};
  TORCH_ARG(std::vector<int64_t>, known_categories) = std::vector<int64_t>{};
  TORCH_ARG(std::vector<int64_t>, static_categories) = std::vector<int64_t>{};
  TORCH_ARG(int64_t, hidden_size) = 64;
  // Width of each time-varying input's embedding and of its GRN in the encoder and decoder
  // selection networks, whose selected sum is then projected to hidden_size (as
  // pytorch-forecasting's hidden_continuous_size). 0: hidden_size, the models before it.
  TORCH_ARG(int64_t, variable_hidden_size) = 0;
  TORCH_ARG(int64_t, attention_heads) = 4;
  TORCH_ARG(int64_t, lstm_layers) = 1;
  TORCH_ARG(double, dropout) = 0.1;
  TORCH_ARG(std::vector<double>, quantiles) = std::vector<double>{0.1, 0.5, 0.9};
  // Quantization-aware training: fake-quantized weights (per channel, symmetric) and
  // observed, fake-quantized activations (per tensor, unsigned) in every layer.
  TORCH_ARG(bool, use_qat) = false;
  TORCH_ARG(int64_t, weight_bits) = 8;           // 8 or 4
  TORCH_ARG(int64_t, activation_bits) = 8;       // 8
  TORCH_ARG(double, observer_averaging) = 0.01;  // moving-average constant of the observers

 public:  // TORCH_ARG leaves the access at private
  // Throws qtft::UsageError naming the flag (--hidden-size, --attention-heads, ...); sizes
  // that come from the data (num_observed, num_known, num_symbols) throw qtft::Error.
  // Every size has an upper bound below, and the quantiles must include 0.5.
  void validate() const;
  static constexpr int64_t kMaxInputs = 256;
  static constexpr int64_t kMaxSymbols = 1'000'000;
  static constexpr int64_t kMaxEncoderLength = 8192;
  static constexpr int64_t kMaxHorizon = 1024;
  static constexpr int64_t kMaxHiddenSize = 1024;
  static constexpr int64_t kMaxAttentionHeads = 64;
  static constexpr int64_t kMaxLstmLayers = 8;
  static constexpr int64_t kMaxQuantiles = 99;
  // Index of the 0.5 quantile (the point forecast); throws if absent.
  int64_t median_index() const;
  static constexpr int64_t kMaxCategories = 1'000'000;  // embedding rows of one categorical
  // Each kind's real inputs, which lead its categoricals.
  int64_t num_observed_reals() const { return num_observed_ - static_cast<int64_t>(observed_categories_.size()); }
  int64_t num_known_reals() const { return num_known_ - static_cast<int64_t>(known_categories_.size()); }
  int64_t num_static_reals() const { return num_static_ - static_cast<int64_t>(static_categories_.size()); }
  // The width variable_hidden_size stands for.
  int64_t variable_width() const { return variable_hidden_size_ > 0 ? variable_hidden_size_ : hidden_size_; }
};

// --variable-hidden-size when none is given: the hidden size for up to
// kNarrowVariablesFrom - 1 time-varying inputs (today's models, unchanged), else the
// narrower kWideVariableHiddenSize (or the hidden size, if smaller). docs/PERFORMANCE.md,
// "The wide TFT", has the measurements behind both numbers.
inline constexpr int64_t kNarrowVariablesFrom = 32;
inline constexpr int64_t kWideVariableHiddenSize = 16;
int64_t default_variable_hidden_size(int64_t hidden_size, int64_t time_varying_inputs);

// The architecture's knobs a user picks; the sizes that come from the data are set from
// the dataset (model::model_options_for).
struct Architecture {
  int64_t hidden_size = 64;
  int64_t variable_hidden_size = 0;  // 0: default_variable_hidden_size for the data's inputs
  int64_t attention_heads = 4;
  int64_t lstm_layers = 1;
  double dropout = 0.1;
  std::vector<double> quantiles{0.1, 0.5, 0.9};
  void apply_to(TftOptions& options) const {
    options.hidden_size(hidden_size)
        .variable_hidden_size(variable_hidden_size)
        .attention_heads(attention_heads)
        .lstm_layers(lstm_layers)
        .dropout(dropout)
        .quantiles(quantiles);
  }
};

nlohmann::json to_json(const TftOptions& options);
TftOptions tft_options_from_json(const nlohmann::json& json);

}  // namespace qtft::model
