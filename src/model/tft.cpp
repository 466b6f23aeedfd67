#include "qtft/model/tft.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/embedding.h>
#include <ATen/ops/lstm.h>
#include <ATen/ops/stack.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "qtft/memory/block_checkpointing.h"
#include "qtft/model/dropout.h"
#include "qtft/model/grouped_variables.h"
#include "qtft/quant/detail/weight_fake_quant.h"

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

// A per-channel quantized weight as the model multiplies by it: fake-quantized under QAT,
// unless it holds its quantized values already (an int8 file's); the Dense layers decide
// the same way for theirs (DenseImpl::weight_in_use).
at::Tensor weight_in_use(const at::Tensor& weight, const TftOptions& o, bool prequantized) {
  return o.use_qat() && !prequantized ? quant::fake_quantize_weight(weight, o.weight_bits()) : weight;
}

torch::nn::ModuleList real_embeddings(int64_t count, int64_t hidden_size) {
  torch::nn::ModuleList list;
  for (int64_t i = 0; i < count; ++i) list->push_back(Dense(1, hidden_size));
  return list;
}

torch::nn::ModuleList categorical_embeddings(const std::vector<int64_t>& categories, int64_t hidden_size) {
  torch::nn::ModuleList list;
  for (int64_t rows : categories) list->push_back(CategoricalEmbedding(rows, hidden_size));
  return list;
}

}  // namespace

TemporalFusionTransformerImpl::TemporalFusionTransformerImpl(TftOptions options) : options_(std::move(options)) {
  options_.validate();
  const auto& o = options_;
  const int64_t hidden = o.hidden_size();

  // The time-varying inputs at their own width (--variable-hidden-size), the statics at the hidden size.
  const int64_t width = o.variable_width();
  observed_embeddings = register_module("observed_embeddings", real_embeddings(o.num_observed_reals(), width));
  known_embeddings = register_module("known_embeddings", real_embeddings(o.num_known_reals(), width));
  symbol_embedding = register_module("symbol_embedding", torch::nn::Embedding(o.num_symbols(), hidden));
  // Declared statics and categoricals after the modules every model has: without them no
  // parameter is drawn, and today's models initialize as they did.
  static_embeddings = register_module("static_embeddings", real_embeddings(o.num_static_reals(), hidden));
  observed_categorical_embeddings =
      register_module("observed_categorical_embeddings", categorical_embeddings(o.observed_categories(), width));
  known_categorical_embeddings =
      register_module("known_categorical_embeddings", categorical_embeddings(o.known_categories(), width));
  static_categorical_embeddings =
      register_module("static_categorical_embeddings", categorical_embeddings(o.static_categories(), hidden));

  // The static inputs need no context: they are what the contexts are made from.
  static_vsn = register_module(
      "static_vsn",
      VariableSelectionNetwork(VariableSelectionNetworkOptions(1 + o.num_static(), hidden).dropout(o.dropout())));
  static_context_variable_selection =
      register_module("static_context_variable_selection", GatedResidualNetwork(grn_options(o)));
  static_context_enrichment = register_module("static_context_enrichment", GatedResidualNetwork(grn_options(o)));
  static_context_state_h = register_module("static_context_state_h", GatedResidualNetwork(grn_options(o)));
  static_context_state_c = register_module("static_context_state_c", GatedResidualNetwork(grn_options(o)));

  encoder_vsn = register_module(
      "encoder_vsn", VariableSelectionNetwork(VariableSelectionNetworkOptions(o.num_observed() + o.num_known(), hidden)
                                                  .variable_size(width)
                                                  .dropout(o.dropout())
                                                  .context_size(hidden)));
  decoder_vsn =
      register_module("decoder_vsn", VariableSelectionNetwork(VariableSelectionNetworkOptions(o.num_known(), hidden)
                                                                  .variable_size(width)
                                                                  .dropout(o.dropout())
                                                                  .context_size(hidden)));

  lstm_encoder = register_module("lstm_encoder", torch::nn::LSTM(lstm_options(o)));
  lstm_decoder = register_module("lstm_decoder", torch::nn::LSTM(lstm_options(o)));
  post_lstm_gate =
      register_module("post_lstm_gate", GateAddNorm(GateAddNormOptions(hidden, hidden).dropout(o.dropout())));

  static_enrichment = register_module("static_enrichment", GatedResidualNetwork(grn_options(o).context_size(hidden)));
  temporal_attention =
      register_module("temporal_attention",
                      InterpretableMultiHeadAttention(
                          InterpretableMultiHeadAttentionOptions(hidden, o.attention_heads()).dropout(o.dropout())));
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
    if (auto* categorical = module->as<CategoricalEmbeddingImpl>()) categorical->enable_qat(settings);
  }
  temporal_attention->enable_qat(settings);
  auto observer = [&](const char* name) {
    return register_module(name, quant::ActivationFakeQuant(settings.observer_options()));
  };
  symbol_embedding_output_quant = observer("symbol_embedding_output_quant");
  lstm_encoder_output_quant = observer("lstm_encoder_output_quant");
  lstm_decoder_output_quant = observer("lstm_decoder_output_quant");
}

void TemporalFusionTransformerImpl::set_checkpoint_policy(memory::CheckpointPolicy policy) {
  TORCH_CHECK(policy != memory::CheckpointPolicy::Auto,
              "TemporalFusionTransformer: resolve the auto checkpoint policy (by measuring) before setting it");
  checkpoint_policy_ = policy;
}

std::vector<std::string> TemporalFusionTransformerImpl::per_channel_quantized_weights() const {
  std::vector<std::string> names;
  if (!options_.use_qat()) return names;
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (item.value()->as<DenseImpl>() != nullptr) names.push_back(item.key() + ".linear.weight");
  }
  names.push_back("symbol_embedding.weight");
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (item.value()->as<CategoricalEmbeddingImpl>() != nullptr) names.push_back(item.key() + ".embedding.weight");
  }
  for (const auto& [prefix, lstm] :
       {std::pair{"lstm_encoder.", lstm_encoder}, std::pair{"lstm_decoder.", lstm_decoder}}) {
    for (const auto& p : lstm->named_parameters()) {
      if (p.value().dim() == 2) names.push_back(prefix + p.key());  // weight_ih_l*, weight_hh_l*
    }
  }
  return names;
}

void TemporalFusionTransformerImpl::set_weights_prequantized(bool prequantized) {
  weights_prequantized_ = prequantized;
  for (const auto& module : modules(/*include_self=*/false)) {
    if (auto* dense = module->as<DenseImpl>()) dense->set_weight_prequantized(prequantized);
    if (auto* categorical = module->as<CategoricalEmbeddingImpl>()) categorical->set_weight_prequantized(prequantized);
  }
}

TemporalFusionTransformerImpl::IntegerProductSummary TemporalFusionTransformerImpl::use_integer_products(
    const std::map<std::string, quant::QuantizedWeight>& weights) {
  TORCH_CHECK(options_.use_qat() && weights_prequantized_,
              "TemporalFusionTransformer: integer products need a model loaded from an int8 file");
  IntegerProductSummary summary;
  std::map<const DenseImpl*, const quant::QuantizedWeight*> by_layer;
  for (const auto& item : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    const auto* dense = item.value()->as<DenseImpl>();
    if (dense == nullptr) continue;
    ++summary.dense_layers;
    const auto it = weights.find(item.key() + ".linear.weight");
    TORCH_CHECK(it != weights.end(), "TemporalFusionTransformer: no integer weight for ", item.key());
    by_layer[dense] = &it->second;
  }
  const IntegerWeights integers = [&](const DenseImpl& dense) -> const quant::QuantizedWeight& {
    return *by_layer.at(&dense);
  };
  auto variable_grn = [](VariableSelectionNetwork& vsn, size_t i) -> GatedResidualNetworkImpl& {
    return vsn->variable_grns->at<GatedResidualNetworkImpl>(i);
  };
  auto embedding_observer = [](torch::nn::ModuleList& embeddings, size_t i) -> const quant::ActivationFakeQuantImpl* {
    return embeddings->at<DenseImpl>(i).output_quant.get();
  };
  std::set<const GatedResidualNetworkImpl*> fed_by_an_observer;
  auto with_input = [&](GatedResidualNetworkImpl& grn, const quant::ActivationFakeQuantImpl* input) {
    summary.products += grn.use_integer_products(integers, input);
    fed_by_an_observer.insert(&grn);
  };
  auto categorical_observer = [](torch::nn::ModuleList& embeddings, size_t i) -> const quant::ActivationFakeQuantImpl* {
    return embeddings->at<CategoricalEmbeddingImpl>(i).output_quant.get();
  };
  // Each kind's embedding observers in the order its selector takes them: reals, then categoricals.
  auto observers_of = [&](torch::nn::ModuleList& reals, torch::nn::ModuleList& categoricals) {
    std::vector<const quant::ActivationFakeQuantImpl*> out;
    for (size_t i = 0; i < reals->size(); ++i) out.push_back(embedding_observer(reals, i));
    for (size_t i = 0; i < categoricals->size(); ++i) out.push_back(categorical_observer(categoricals, i));
    return out;
  };
  auto statics = observers_of(static_embeddings, static_categorical_embeddings);
  statics.insert(statics.begin(), symbol_embedding_output_quant.get());
  const auto observed = observers_of(observed_embeddings, observed_categorical_embeddings);
  const auto known = observers_of(known_embeddings, known_categorical_embeddings);
  for (size_t i = 0; i < statics.size(); ++i) with_input(variable_grn(static_vsn, i), statics[i]);
  // The encoder selects among the observed inputs, then the known ones; the decoder among
  // the known ones (forward embeds each known input once for both).
  for (size_t i = 0; i < observed.size(); ++i) with_input(variable_grn(encoder_vsn, i), observed[i]);
  for (size_t i = 0; i < known.size(); ++i) {
    with_input(variable_grn(encoder_vsn, observed.size() + i), known[i]);
    with_input(variable_grn(decoder_vsn, i), known[i]);
  }
  for (const auto& module : modules(/*include_self=*/false)) {
    auto* grn = module->as<GatedResidualNetworkImpl>();
    if (grn != nullptr && !fed_by_an_observer.count(grn))
      summary.products += grn->use_integer_products(integers, nullptr);
  }
  summary.products += post_attention_gate->use_integer_products(integers, *temporal_attention->out_proj->output_quant);
  return summary;
}

at::Tensor TemporalFusionTransformerImpl::embed_symbol(const at::Tensor& symbol) {
  if (!options_.use_qat()) return symbol_embedding(symbol);
  return symbol_embedding_output_quant(
      at::embedding(weight_in_use(symbol_embedding->weight, options_, weights_prequantized_), symbol));
}

std::vector<at::Tensor> TemporalFusionTransformerImpl::lstm_weights(torch::nn::LSTM& lstm) {
  // nn::LSTM offers no hook on its weights, so the model runs its kernel (at::lstm) itself;
  // under QAT with fake-quantized input and recurrent matrices. Biases stay in float, as
  // int8 backends keep them in 32 bits.
  std::vector<at::Tensor> weights;
  for (const auto& w : lstm->all_weights()) {
    weights.push_back(w.dim() == 2 ? weight_in_use(w, options_, weights_prequantized_) : w);
  }
  return weights;
}

std::vector<at::Tensor> TemporalFusionTransformerImpl::lstm_step(const torch::nn::LSTM& lstm, const at::Tensor& input,
                                                                 const at::Tensor& h, const at::Tensor& c,
                                                                 at::TensorList weights) {
  const auto& lo = lstm->options;
  if (input.is_cuda() && is_training() && lo.num_layers() > 1 && lo.dropout() > 0.0 && !lo.bidirectional()) {
    // cuDNN draws the dropout between layers from a state of its own, re-seeded whenever the
    // CUDA generator's state is set, as a checkpoint's recompute does before it replays: the
    // replay would drop other units than the forward did. One layer at a time, the dropout
    // between them drawn from the CUDA generator, which the recompute restores.
    const size_t per_layer = weights.size() / static_cast<size_t>(lo.num_layers());
    at::Tensor x = input;
    std::vector<at::Tensor> hs, cs;
    for (int64_t l = 0; l < lo.num_layers(); ++l) {
      auto [out, h_l, c_l] = at::lstm(x, {h.narrow(0, l, 1), c.narrow(0, l, 1)},
                                      weights.slice(static_cast<size_t>(l) * per_layer, per_layer), lo.bias(), 1, 0.0,
                                      true, false, lo.batch_first());
      hs.push_back(h_l);
      cs.push_back(c_l);
      x = l + 1 < lo.num_layers() ? apply_dropout(out, lo.dropout(), true, nullptr) : out;
    }
    return {x, at::cat(hs), at::cat(cs)};
  }
  auto [output, h_out, c_out] = at::lstm(input, {h, c}, weights, lo.bias(), lo.num_layers(), lo.dropout(),
                                         is_training(), lo.bidirectional(), lo.batch_first());
  return {output, h_out, c_out};
}

int64_t TemporalFusionTransformerImpl::encoder_chunk_length() const {
  // About sqrt(L) chunks of about sqrt(L) steps: the recompute of one chunk then holds as
  // much as the chunk boundaries together, the least peak for this kind of split.
  const auto l = options_.encoder_length();
  auto chunk = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(l))));
  return std::max<int64_t>(1, chunk);
}

TftOutput TemporalFusionTransformerImpl::forward(const at::Tensor& observed, const at::Tensor& known,
                                                 const at::Tensor& symbol, const at::Tensor& statics) {
  check_inputs(observed, known, symbol, statics);
  // Each step below runs its blocks through `blocks`, which checkpoints those the policy
  // names; the blocks and their order are the same under every policy, so every policy
  // computes bitwise the same step (and draws dropout masks in the same order).
  std::optional<memory::AutocastScope> autocast;
  if (precision_ != Precision::Fp32) {
    autocast.emplace(memory::AutocastState::with_precision(precision_, observed.device().type()));
  }
  const memory::BlockCheckpointing blocks(checkpoint_policy_);
  const StaticContexts contexts = encode_statics(symbol, statics, blocks);  // static covariate encoders, 4.3
  const SelectedInputs selected = select_inputs(observed, known, contexts.selection, blocks);
  const SequenceOutputs sequence = encode_decode(selected, contexts, blocks);
  const at::Tensor temporal = gate_lstm(sequence, selected, blocks);
  const at::Tensor enriched = enrich(temporal, contexts.enrichment, blocks);
  const AttentionOutputs attention = attend(enriched, blocks);
  const at::Tensor quantiles = output_quantiles(attention, temporal, blocks);
  // In FP32 whatever the products ran in: the loss, the metrics and every reader of a
  // forecast take FP32 (the parameters' type otherwise).
  using memory::full_precision;
  return {full_precision(quantiles), full_precision(contexts.weights), full_precision(selected.past.weights),
          full_precision(selected.future.weights), full_precision(attention.weights)};
}

void TemporalFusionTransformerImpl::check_inputs(const at::Tensor& observed, const at::Tensor& known,
                                                 const at::Tensor& symbol, const at::Tensor& statics) const {
  const auto& o = options_;
  const int64_t l = o.encoder_length(), h = o.horizon();
  TORCH_CHECK(observed.dim() == 3 && observed.size(1) == l && observed.size(2) == o.num_observed(),
              "TemporalFusionTransformer: expected observed [B, ", l, ", ", o.num_observed(), "], got ",
              observed.sizes());
  const int64_t b = observed.size(0);
  TORCH_CHECK(known.dim() == 3 && known.size(0) == b && known.size(1) == l + h && known.size(2) == o.num_known(),
              "TemporalFusionTransformer: expected known [", b, ", ", l + h, ", ", o.num_known(), "], got ",
              known.sizes());
  TORCH_CHECK(symbol.dim() == 1 && symbol.size(0) == b && symbol.scalar_type() == at::kLong,
              "TemporalFusionTransformer: expected symbol int64 [", b, "], got ", symbol.scalar_type(), " ",
              symbol.sizes());
  TORCH_CHECK(observed.is_floating_point() && known.scalar_type() == observed.scalar_type(),
              "TemporalFusionTransformer: expected floating-point observed and known of one dtype, got ",
              observed.scalar_type(), " and ", known.scalar_type());
  // A model not yet on its inputs' device (or the reverse) would fail deep in some kernel.
  const c10::Device device = symbol_embedding->weight.device();
  TORCH_CHECK(observed.device() == device && known.device() == device && symbol.device() == device,
              "TemporalFusionTransformer: the model is on ", device, " and its inputs on ", observed.device(), ", ",
              known.device(), " and ", symbol.device(), ": move the model (model->to(device)) before running it");
  const int64_t s = o.num_static();
  // Without statics, none or an empty [B, 0] (a batch's).
  TORCH_CHECK((s == 0 && (!statics.defined() || statics.numel() == 0)) ||
                  (statics.defined() && statics.dim() == 2 && statics.size(0) == b && statics.size(1) == s &&
                   statics.scalar_type() == observed.scalar_type()),
              "TemporalFusionTransformer: expected statics [", b, ", ", s, "] of ", observed.scalar_type(),
              s == 0 ? " (or none)" : "", ", got ",
              statics.defined() ? c10::str(statics.scalar_type(), " ", statics.sizes()) : std::string("none"));
  if (symbol.is_cpu() && b > 0) {
    // On CUDA an out-of-range index is a device-side assert that kills the process, and a
    // check there would sync every step; on the CPU a clear message costs nothing.
    const int64_t lo = symbol.min().item<int64_t>(), hi = symbol.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < o.num_symbols(), "TemporalFusionTransformer: symbol ids must be in [0, ",
                o.num_symbols(), "), got values in [", lo, ", ", hi, "]");
  }
}

// Block functions run again in the backward pass, long after the calling frame is gone:
// they capture the model and plain values (`blocks` by copy), never references to locals.

TemporalFusionTransformerImpl::StaticContexts TemporalFusionTransformerImpl::encode_statics(
    const at::Tensor& symbol, const at::Tensor& declared, const memory::BlockCheckpointing& blocks) {
  // The static inputs selected into one embedding, four contexts: c_s for selection, c_e for
  // enrichment, and the LSTM's initial state (c_h, c_c).
  Tensors inputs{symbol};
  if (options_.num_static() > 0) inputs.push_back(declared);
  const Tensors statics = blocks.run("static_covariates", inputs, [this](const Tensors& in) {
    Tensors embedded{embed_symbol(in[0])};
    const int64_t reals = options_.num_static_reals();
    for (int64_t i = 0; i < reals; ++i)
      embedded.push_back(static_embeddings->at<DenseImpl>(static_cast<size_t>(i)).forward(in[1].narrow(-1, i, 1)));
    for (size_t j = 0; j < static_categorical_embeddings->size(); ++j) {
      embedded.push_back(static_categorical_embeddings->at<CategoricalEmbeddingImpl>(j).forward(
          in[1].select(-1, reals + static_cast<int64_t>(j))));
    }
    auto [static_embedding, static_weights] =
        static_vsn(embedded.size() == 1 ? embedded[0].unsqueeze(1) : at::stack(embedded, 1));
    return Tensors{static_weights, static_context_variable_selection(static_embedding),
                   static_context_enrichment(static_embedding), static_context_state_h(static_embedding),
                   static_context_state_c(static_embedding)};
  });
  const int64_t layers = options_.lstm_layers();
  return {statics[0], statics[1], statics[2], statics[3].unsqueeze(0).repeat({layers, 1, 1}),
          statics[4].unsqueeze(0).repeat({layers, 1, 1})};
}

TemporalFusionTransformerImpl::SelectedInputs TemporalFusionTransformerImpl::select_inputs(
    const at::Tensor& observed, const at::Tensor& known, const at::Tensor& context,
    const memory::BlockCheckpointing& blocks) {
  // Past inputs are observed then known (the order of encoder_weights); future inputs are
  // known. The selection networks embed them from the raw columns in each block that needs
  // them, so that no block keeps the embeddings (a [B, T, inputs, width] tensor, the largest
  // a wide model holds); their observers take the step's batch in first, here, the known
  // inputs once over encoder and decoder together.
  const int64_t l = options_.encoder_length(), h = options_.horizon();
  const InputKind observed_kind = input_kind(observed_embeddings, observed_categorical_embeddings);
  const InputKind known_kind = input_kind(known_embeddings, known_categorical_embeddings);
  if (options_.use_qat()) observe_input_embeddings({observed_kind, known_kind}, {observed, known});
  const int64_t b = observed.size(0);
  std::vector<InputKind> past_kinds{observed_kind, known_kind};
  Tensors past_raw{observed, known.narrow(1, 0, l)};
  if (observed_kind.categoricals.empty() && known_kind.categoricals.empty()) {
    // Reals alone: their raw columns side by side, once, so that a block embeds any range of
    // them in one pass instead of concatenating the embeddings of each kind.
    past_kinds = {InputKind{observed_kind.reals, {}}};
    past_kinds.front().reals.insert(past_kinds.front().reals.end(), known_kind.reals.begin(), known_kind.reals.end());
    past_raw = {at::cat(past_raw, -1)};
  }
  const SelectionInputs past{past_raw, b * l, [past_kinds](const Tensors& raw, int64_t first, int64_t count) {
                               return embed_variables(past_kinds, raw, first, count);
                             }};
  const SelectionInputs future{
      {known.narrow(1, l, h)}, b * h, [known_kind](const Tensors& raw, int64_t first, int64_t count) {
        return embed_variables({known_kind}, raw, first, count);
      }};
  auto selected_past = encoder_vsn->forward_blocks(past, context, blocks);
  auto selected_future = decoder_vsn->forward_blocks(future, context, blocks);
  return {std::move(selected_past), std::move(selected_future)};
}

TemporalFusionTransformerImpl::InputKind TemporalFusionTransformerImpl::input_kind(
    torch::nn::ModuleList& reals, torch::nn::ModuleList& categoricals) {
  InputKind kind;
  for (const auto& module : *reals) kind.reals.push_back(module->as<DenseImpl>());
  for (const auto& module : *categoricals) kind.categoricals.push_back(module->as<CategoricalEmbeddingImpl>());
  return kind;
}

void TemporalFusionTransformerImpl::observe_input_embeddings(const std::vector<InputKind>& kinds, const Tensors& raw) {
  // The embeddings' one observation of the step, without gradient: the selection networks'
  // blocks reapply the parameters it leaves (bitwise what it returns) to embeddings of their own.
  c10::NoGradGuard no_grad;
  for (size_t k = 0; k < kinds.size(); ++k) {
    const auto reals = static_cast<int64_t>(kinds[k].reals.size());
    if (reals > 0) grouped_real_embedding(kinds[k].reals, raw[k].narrow(-1, 0, reals));
    for (size_t j = 0; j < kinds[k].categoricals.size(); ++j)
      kinds[k].categoricals[j]->forward(raw[k].select(-1, reals + static_cast<int64_t>(j)));
  }
}

at::Tensor TemporalFusionTransformerImpl::embed_variables(const std::vector<InputKind>& kinds, const Tensors& raw,
                                                          int64_t first, int64_t count) {
  // The variables run through the kinds in order, each kind's reals before its categoricals.
  Tensors parts;
  const int64_t end = first + count;
  int64_t start = 0;  // the variable index where the current kind's segment begins
  for (size_t k = 0; k < kinds.size(); ++k) {
    const InputKind& kind = kinds[k];
    const auto reals = static_cast<int64_t>(kind.reals.size());
    const int64_t a = std::max(first, start), b = std::min(end, start + reals);
    if (a < b) {
      const std::vector<DenseImpl*> layers(kind.reals.begin() + (a - start), kind.reals.begin() + (b - start));
      parts.push_back(grouped_real_embedding(layers, raw[k].narrow(-1, a - start, b - a), false));
    }
    start += reals;
    const auto categoricals = static_cast<int64_t>(kind.categoricals.size());
    const int64_t c = std::max(first, start), d = std::min(end, start + categoricals);
    if (c < d) {
      Tensors levels;
      for (int64_t j = c - start; j < d - start; ++j)
        levels.push_back(kind.categoricals[static_cast<size_t>(j)]->forward_again(raw[k].select(-1, reals + j)));
      parts.push_back(at::stack(levels, -2));
    }
    start += categoricals;
  }
  return parts.size() == 1 ? parts[0] : at::cat(parts, -2);
}

TemporalFusionTransformerImpl::SequenceOutputs TemporalFusionTransformerImpl::encode_decode(
    const SelectedInputs& selected, const StaticContexts& statics, const memory::BlockCheckpointing& blocks) {
  // The decoder continues from the encoder's final state. In training the encoder runs in
  // time chunks, each its own block, so that the lstm policy can keep one chunk's
  // activations at a time; every policy runs the same chunks, as a chunk boundary changes
  // the bits (the dropout between LSTM layers draws per call). The blocks policy recomputes
  // the whole encoder as one block. Without gradients nothing is checkpointed, and one
  // at::lstm call does it: each call costs a setup of its own (at batch 1, 13 chunks take
  // 2.6x the time of one call).
  const int64_t l = options_.encoder_length();
  const bool chunked = c10::GradMode::is_enabled();
  const Tensors encoder =
      blocks.run("lstm_encoder", {selected.past.output, statics.state_h, statics.state_c},
                 [this, l, chunked, blocks](const Tensors& in) {
                   const Tensors weights = lstm_weights(lstm_encoder);
                   const int64_t chunk = chunked ? encoder_chunk_length() : l;
                   Tensors outputs;
                   at::Tensor h_t = in[1], c_t = in[2];
                   for (int64_t start = 0; start < l; start += chunk) {
                     Tensors chunk_inputs{in[0].narrow(1, start, std::min(chunk, l - start)), h_t, c_t};
                     chunk_inputs.insert(chunk_inputs.end(), weights.begin(), weights.end());
                     Tensors r = blocks.run("lstm_encoder_chunk", chunk_inputs, [this](const Tensors& x) {
                       return lstm_step(lstm_encoder, x[0], x[1], x[2], at::TensorList(x).slice(3));
                     });
                     outputs.push_back(r[0]);
                     h_t = r[1];
                     c_t = r[2];
                   }
                   at::Tensor output = outputs.size() == 1 ? outputs[0] : at::cat(outputs, 1);
                   if (options_.use_qat()) output = lstm_encoder_output_quant(std::move(output));
                   return Tensors{output, h_t, c_t};
                 });
  const at::Tensor decoder =
      blocks.run_one("lstm_decoder", {selected.future.output, encoder[1], encoder[2]}, [this](const Tensors& in) {
        at::Tensor output = lstm_step(lstm_decoder, in[0], in[1], in[2], lstm_weights(lstm_decoder))[0];
        if (options_.use_qat()) output = lstm_decoder_output_quant(std::move(output));
        return Tensors{output};
      });
  return {encoder[0], decoder};
}

at::Tensor TemporalFusionTransformerImpl::gate_lstm(const SequenceOutputs& sequence, const SelectedInputs& selected,
                                                    const memory::BlockCheckpointing& blocks) {
  // A gated skip over the LSTM, over the whole sequence.
  return blocks.run_one("post_lstm_gate",
                        {sequence.encoder, sequence.decoder, selected.past.output, selected.future.output},
                        [this](const Tensors& in) {
                          return Tensors{post_lstm_gate(at::cat({in[0], in[1]}, 1), at::cat({in[2], in[3]}, 1))};
                        });
}

at::Tensor TemporalFusionTransformerImpl::enrich(const at::Tensor& temporal, const at::Tensor& context_enrichment,
                                                 const memory::BlockCheckpointing& blocks) {
  return blocks.run_one("static_enrichment", {temporal, context_enrichment},
                        [this](const Tensors& in) { return Tensors{static_enrichment(in[0], in[1])}; });
}

TemporalFusionTransformerImpl::AttentionOutputs TemporalFusionTransformerImpl::attend(
    const at::Tensor& enriched, const memory::BlockCheckpointing& blocks) {
  // Decoder positions attend causally over every position, then a gated skip.
  const int64_t l = options_.encoder_length(), h = options_.horizon();
  const Tensors attention = blocks.run("attention", {enriched}, [this, l, h](const Tensors& in) {
    const at::Tensor& enriched = in[0];
    const at::Tensor enriched_decoder = enriched.narrow(1, l, h);
    auto [attended, weights] =
        temporal_attention(enriched_decoder, enriched, enriched, decoder_causal_mask(l, h, enriched.device()));
    return Tensors{post_attention_gate(attended, enriched_decoder), weights};
  });
  return {attention[0], attention[1]};
}

at::Tensor TemporalFusionTransformerImpl::output_quantiles(const AttentionOutputs& attention,
                                                           const at::Tensor& temporal,
                                                           const memory::BlockCheckpointing& blocks) {
  // Position-wise GRN, a gated skip over the whole transformer block, then the quantiles.
  const int64_t l = options_.encoder_length(), h = options_.horizon();
  return blocks.run_one("output", {attention.gated, temporal.narrow(1, l, h)}, [this](const Tensors& in) {
    return Tensors{quantile_outputs(pre_output_gate(positionwise_grn(in[0]), in[1]))};
  });
}

}  // namespace qtft::model
