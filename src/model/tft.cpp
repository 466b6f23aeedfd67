#include "qtft/model/tft.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/lstm.h>
#include <ATen/ops/stack.h>
#include <c10/util/Exception.h>

#include <tuple>
#include <utility>
#include <vector>

#include "qtft/quant/weight_fake_quant.h"

namespace qtft::model {
namespace {

GatedResidualNetworkOptions grn_options(const TftOptions& o) {
  return GatedResidualNetworkOptions(o.hidden_size(), o.hidden_size(), o.hidden_size()).dropout(o.dropout());
}

torch::nn::LSTMOptions lstm_options(const TftOptions& o) {
  // LibTorch warns about (and ignores) dropout on a single-layer LSTM: it only acts between layers.
  return torch::nn::LSTMOptions(o.hidden_size(), o.hidden_size())
      .num_layers(o.lstm_layers())
      .batch_first(true)
      .dropout(o.lstm_layers() > 1 ? o.dropout() : 0.0);
}

torch::nn::ModuleList real_embeddings(int64_t count, int64_t hidden_size) {
  torch::nn::ModuleList list;
  for (int64_t i = 0; i < count; ++i) list->push_back(Dense(1, hidden_size));
  return list;
}

// Embeds each column of x [B, T, n] with its own Dense(1 -> hidden): n tensors [B, T, hidden].
std::vector<at::Tensor> embed_columns(torch::nn::ModuleList& embeddings, const at::Tensor& x) {
  std::vector<at::Tensor> out;
  out.reserve(embeddings->size());
  for (size_t i = 0; i < embeddings->size(); ++i) {
    out.push_back(embeddings->at<DenseImpl>(i).forward(x.narrow(-1, static_cast<int64_t>(i), 1)));
  }
  return out;
}

}  // namespace

TemporalFusionTransformerImpl::TemporalFusionTransformerImpl(TftOptions options) : options_(std::move(options)) {
  options_.validate();
  const auto& o = options_;
  const int64_t hidden = o.hidden_size();

  observed_embeddings = register_module("observed_embeddings", real_embeddings(o.num_observed(), hidden));
  known_embeddings = register_module("known_embeddings", real_embeddings(o.num_known(), hidden));
  symbol_embedding = register_module("symbol_embedding", torch::nn::Embedding(o.num_symbols(), hidden));

  // The static input needs no context: it is what the contexts are made from.
  static_vsn = register_module(
      "static_vsn", VariableSelectionNetwork(VariableSelectionNetworkOptions(1, hidden).dropout(o.dropout())));
  static_context_variable_selection = register_module("static_context_variable_selection", GatedResidualNetwork(grn_options(o)));
  static_context_enrichment = register_module("static_context_enrichment", GatedResidualNetwork(grn_options(o)));
  static_context_state_h = register_module("static_context_state_h", GatedResidualNetwork(grn_options(o)));
  static_context_state_c = register_module("static_context_state_c", GatedResidualNetwork(grn_options(o)));

  encoder_vsn = register_module(
      "encoder_vsn", VariableSelectionNetwork(VariableSelectionNetworkOptions(o.num_observed() + o.num_known(), hidden)
                                                  .dropout(o.dropout())
                                                  .context_size(hidden)));
  decoder_vsn = register_module(
      "decoder_vsn",
      VariableSelectionNetwork(VariableSelectionNetworkOptions(o.num_known(), hidden).dropout(o.dropout()).context_size(hidden)));

  lstm_encoder = register_module("lstm_encoder", torch::nn::LSTM(lstm_options(o)));
  lstm_decoder = register_module("lstm_decoder", torch::nn::LSTM(lstm_options(o)));
  post_lstm_gate = register_module("post_lstm_gate", GateAddNorm(GateAddNormOptions(hidden, hidden).dropout(o.dropout())));

  static_enrichment = register_module("static_enrichment", GatedResidualNetwork(grn_options(o).context_size(hidden)));
  temporal_attention = register_module(
      "temporal_attention",
      InterpretableMultiHeadAttention(InterpretableMultiHeadAttentionOptions(hidden, o.attention_heads()).dropout(o.dropout())));
  post_attention_gate =
      register_module("post_attention_gate", GateAddNorm(GateAddNormOptions(hidden, hidden).dropout(o.dropout())));
  positionwise_grn = register_module("positionwise_grn", GatedResidualNetwork(grn_options(o)));
  // No dropout on the last skip connection, as in the authors' implementation: it feeds the
  // output layer directly.
  pre_output_gate = register_module("pre_output_gate", GateAddNorm(GateAddNormOptions(hidden, hidden)));
  quantile_outputs =
      register_module("quantile_outputs", QuantileOutput(hidden, static_cast<int64_t>(o.quantiles().size())));
  if (o.use_qat()) enable_qat();
}

void TemporalFusionTransformerImpl::enable_qat() {
  const quant::QatSettings settings{options_.weight_bits(), options_.activation_bits(), options_.observer_averaging()};
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* dense = module->as<DenseImpl>()) dense->enable_qat(settings);
  }
  temporal_attention->enable_qat(settings);
  auto observer = [&](const char* name) {
    return register_module(name, quant::ActivationFakeQuant(settings.observer_options()));
  };
  symbol_embedding_output_quant = observer("symbol_embedding_output_quant");
  lstm_encoder_output_quant = observer("lstm_encoder_output_quant");
  lstm_decoder_output_quant = observer("lstm_decoder_output_quant");
}

at::Tensor TemporalFusionTransformerImpl::embed_symbol(const at::Tensor& symbol) {
  if (!options_.use_qat()) return symbol_embedding(symbol);
  auto table = quant::fake_quantize_weight(symbol_embedding->weight, options_.weight_bits());
  return symbol_embedding_output_quant(at::embedding(table, symbol));
}

// nn::LSTM offers no hook on its weights, so under QAT the same kernel (at::lstm) runs with
// fake-quantized input and recurrent matrices; biases stay in float, as int8 backends keep
// them in 32 bits.
std::tuple<at::Tensor, TemporalFusionTransformerImpl::LstmState> TemporalFusionTransformerImpl::run_lstm(
    torch::nn::LSTM& lstm, quant::ActivationFakeQuant& output_quant, const at::Tensor& input, const LstmState& state) {
  if (!options_.use_qat()) return lstm(input, state);
  std::vector<at::Tensor> weights;
  for (const auto& w : lstm->all_weights()) {
    weights.push_back(w.dim() == 2 ? quant::fake_quantize_weight(w, options_.weight_bits()) : w);
  }
  const auto& lo = lstm->options;
  auto [output, h, c] = at::lstm(input, {std::get<0>(state), std::get<1>(state)}, weights, lo.bias(), lo.num_layers(),
                                 lo.dropout(), is_training(), lo.bidirectional(), lo.batch_first());
  return {output_quant(output), {h, c}};
}

TftOutput TemporalFusionTransformerImpl::forward(const at::Tensor& observed, const at::Tensor& known,
                                                 const at::Tensor& symbol) {
  const auto& o = options_;
  const int64_t l = o.encoder_length(), h = o.horizon();
  TORCH_CHECK(observed.dim() == 3 && observed.size(1) == l && observed.size(2) == o.num_observed(),
              "TemporalFusionTransformer: expected observed [B, ", l, ", ", o.num_observed(), "], got ", observed.sizes());
  const int64_t b = observed.size(0);
  TORCH_CHECK(known.dim() == 3 && known.size(0) == b && known.size(1) == l + h && known.size(2) == o.num_known(),
              "TemporalFusionTransformer: expected known [", b, ", ", l + h, ", ", o.num_known(), "], got ", known.sizes());
  TORCH_CHECK(symbol.dim() == 1 && symbol.size(0) == b && symbol.scalar_type() == at::kLong,
              "TemporalFusionTransformer: expected symbol int64 [", b, "], got ", symbol.scalar_type(), " ", symbol.sizes());
  TORCH_CHECK(observed.is_floating_point() && known.scalar_type() == observed.scalar_type(),
              "TemporalFusionTransformer: expected floating-point observed and known of one dtype, got ",
              observed.scalar_type(), " and ", known.scalar_type());
  if (symbol.is_cpu() && b > 0) {
    // On CUDA an out-of-range index is a device-side assert that kills the process, and a
    // check there would sync every step; on the CPU a clear message costs nothing.
    const int64_t lo = symbol.min().item<int64_t>(), hi = symbol.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < o.num_symbols(), "TemporalFusionTransformer: symbol ids must be in [0, ",
                o.num_symbols(), "), got values in [", lo, ", ", hi, "]");
  }

  // Static covariate encoders (section 4.3): one static embedding, four contexts.
  auto [static_embedding, static_weights] = static_vsn(embed_symbol(symbol).unsqueeze(1));
  const at::Tensor context_selection = static_context_variable_selection(static_embedding);
  const at::Tensor context_enrichment = static_context_enrichment(static_embedding);
  const at::Tensor state_h = static_context_state_h(static_embedding).unsqueeze(0).repeat({o.lstm_layers(), 1, 1});
  const at::Tensor state_c = static_context_state_c(static_embedding).unsqueeze(0).repeat({o.lstm_layers(), 1, 1});

  // Past inputs are observed then known (the order of encoder_weights); future inputs are known.
  std::vector<at::Tensor> past = embed_columns(observed_embeddings, observed);
  std::vector<at::Tensor> future;
  for (const at::Tensor& k : embed_columns(known_embeddings, known)) {
    past.push_back(k.narrow(1, 0, l));
    future.push_back(k.narrow(1, l, h));
  }
  auto [encoder_selected, encoder_weights] = encoder_vsn(at::stack(past, -2), context_selection);
  auto [decoder_selected, decoder_weights] = decoder_vsn(at::stack(future, -2), context_selection);

  // Sequence-to-sequence layer: the decoder continues from the encoder's final state.
  auto [encoder_lstm, encoder_state] =
      run_lstm(lstm_encoder, lstm_encoder_output_quant, encoder_selected, std::make_tuple(state_h, state_c));
  auto decoder_lstm = std::get<0>(run_lstm(lstm_decoder, lstm_decoder_output_quant, decoder_selected, encoder_state));
  const at::Tensor temporal =
      post_lstm_gate(at::cat({encoder_lstm, decoder_lstm}, 1), at::cat({encoder_selected, decoder_selected}, 1));

  const at::Tensor enriched = static_enrichment(temporal, context_enrichment);
  const at::Tensor enriched_decoder = enriched.narrow(1, l, h);
  auto [attended, attention] =
      temporal_attention(enriched_decoder, enriched, enriched, decoder_causal_mask(l, h, enriched.device()));

  at::Tensor x = post_attention_gate(attended, enriched_decoder);
  x = positionwise_grn(x);
  x = pre_output_gate(x, temporal.narrow(1, l, h));
  return {quantile_outputs(x), static_weights, encoder_weights, decoder_weights, attention};
}

}  // namespace qtft::model
