#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <string>
#include <vector>

#include "qtft/memory/autocast.h"
#include "qtft/memory/block_checkpointing.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/model/categorical_embedding.h"
#include "qtft/model/gated_linear_unit.h"
#include "qtft/model/gated_residual_network.h"
#include "qtft/model/interpretable_attention.h"
#include "qtft/model/quantile_output.h"
#include "qtft/model/tft_options.h"
#include "qtft/model/variable_selection_network.h"
#include "qtft/quant/activation_observer.h"

namespace qtft::model {

// Everything one forward pass gives: the forecast and the TFT's interpretability outputs.
struct TftOutput {
  at::Tensor quantiles;        // [B, H, Q]   forecast of the scaled target per quantile
  at::Tensor static_weights;   // [B, 1+S]    static variable selection: the symbol, then the declared statics
  at::Tensor encoder_weights;  // [B, L, O+K] past variable selection: observed then known
  at::Tensor decoder_weights;  // [B, H, K]   future variable selection
  at::Tensor attention;        // [B, H, L+H] decoder queries over all positions, heads averaged
};

// The Temporal Fusion Transformer of Lim et al. (2021), for the symbol and S declared
// static inputs, O past-only inputs and K known inputs, each kind's reals before its
// categoricals. Submodule names are stable paths (quantization hangs observers on them,
// model files store weights under them):
//
//   observed_embeddings.<i>, known_embeddings.<i>,  Dense(1 -> width) per real input (width:
//                                                   --variable-hidden-size; statics: hidden)
//   static_embeddings.<i>
//   observed_categorical_embeddings.<i>, ...        CategoricalEmbedding per categorical input
//   known_..., static_categorical_embeddings.<i>
//   symbol_embedding                                 Embedding(num_symbols, hidden)
//   static_vsn                                       selection over the symbol and the statics
//   static_context_{variable_selection,enrichment,state_h,state_c}   GRNs giving c_s, c_e, c_h, c_c
//   encoder_vsn, decoder_vsn                         selection over past / future inputs, given c_s
//   lstm_encoder, lstm_decoder                       seq2seq LSTM started from (c_h, c_c)
//   post_lstm_gate                                   GateAddNorm(LSTM output, skip = selected inputs)
//   static_enrichment                                GRN given c_e
//   temporal_attention                               decoder queries, causal over all positions
//   post_attention_gate, positionwise_grn, pre_output_gate, quantile_outputs
class TemporalFusionTransformerImpl : public torch::nn::Module {
 public:
  explicit TemporalFusionTransformerImpl(TftOptions options);

  // observed [B, L, O] and known [B, L+H, K] floating point (the parameters' dtype), symbol
  // [B] int64 in [0, num_symbols), statics [B, S] of the dtype (undefined when S is 0). L
  // and H must be the options' encoder_length and horizon. A categorical input's values are
  // its level indices, exact in floating point.
  TftOutput forward(const at::Tensor& observed, const at::Tensor& known, const at::Tensor& symbol,
                    const at::Tensor& statics = {});

  const TftOptions& options() const { return options_; }

  // What the backward pass recomputes instead of keeping (None, Blocks or Lstm; Auto is
  // resolved by the trainer). A runtime setting, not part of the options or the model
  // file: every policy computes bitwise the same forward, gradients and observer updates.
  void set_checkpoint_policy(memory::CheckpointPolicy policy);
  memory::CheckpointPolicy checkpoint_policy() const { return checkpoint_policy_; }

  // The type forward's matrix products run in (Precision): bf16 opens an autocast
  // scope for the inputs' device around the forward, and the outputs come back in FP32. A
  // runtime setting like the checkpoint policy: the weights and the model file stay FP32.
  void set_precision(Precision precision) { precision_ = precision; }
  Precision precision() const { return precision_; }

  // The parameters that QAT fake-quantizes per output channel, by module path: every Dense
  // weight, the symbol embedding table and the LSTMs' input and recurrent matrices. What
  // an int8 export stores as integers; empty without use_qat.
  std::vector<std::string> per_channel_quantized_weights() const;
  // Those weights already hold their quantized values (DenseImpl::set_weight_prequantized),
  // as a model loaded from an int8 file does: used as they are, not quantized per call.
  void set_weights_prequantized(bool prequantized);
  bool weights_prequantized() const { return weights_prequantized_; }

  // Int8 inference: every Dense product whose input is always one observer's output runs in
  // integers from now on (outside training, without gradient), on `weights`, the integers
  // behind the prequantized weights by name (an int8 file's). Those products are each
  // GRN's gate (fed by its fc2), the first layer of every variable's GRN (fed by that
  // variable's embedding) and the gate after attention (fed by its output projection).
  // The rest, the LSTMs, attention's projections and every layer norm, softmax and gate
  // nonlinearity stay in float, as the fake-quantized model computed them.
  struct IntegerProductSummary {
    int64_t dense_layers = 0;
    IntegerProductCount products;
  };
  IntegerProductSummary use_integer_products(const std::map<std::string, quant::QuantizedWeight>& weights);

  torch::nn::ModuleList observed_embeddings{nullptr};
  torch::nn::ModuleList known_embeddings{nullptr};
  torch::nn::ModuleList static_embeddings{nullptr};
  torch::nn::ModuleList observed_categorical_embeddings{nullptr};
  torch::nn::ModuleList known_categorical_embeddings{nullptr};
  torch::nn::ModuleList static_categorical_embeddings{nullptr};
  torch::nn::Embedding symbol_embedding{nullptr};
  VariableSelectionNetwork static_vsn{nullptr};
  GatedResidualNetwork static_context_variable_selection{nullptr};
  GatedResidualNetwork static_context_enrichment{nullptr};
  GatedResidualNetwork static_context_state_h{nullptr};
  GatedResidualNetwork static_context_state_c{nullptr};
  VariableSelectionNetwork encoder_vsn{nullptr};
  VariableSelectionNetwork decoder_vsn{nullptr};
  torch::nn::LSTM lstm_encoder{nullptr};
  torch::nn::LSTM lstm_decoder{nullptr};
  GateAddNorm post_lstm_gate{nullptr};
  GatedResidualNetwork static_enrichment{nullptr};
  InterpretableMultiHeadAttention temporal_attention{nullptr};
  GateAddNorm post_attention_gate{nullptr};
  GatedResidualNetwork positionwise_grn{nullptr};
  GateAddNorm pre_output_gate{nullptr};
  QuantileOutput quantile_outputs{nullptr};
  // Observers of the layers that are not Dense, registered only with use_qat; observer
  // names drop the "_quant" suffix ("symbol_embedding_output" -> symbol_embedding).
  quant::ActivationFakeQuant symbol_embedding_output_quant{nullptr};
  quant::ActivationFakeQuant lstm_encoder_output_quant{nullptr};
  quant::ActivationFakeQuant lstm_decoder_output_quant{nullptr};

 private:
  using Tensors = std::vector<at::Tensor>;
  // What the forward's steps pass on, by name.
  struct StaticContexts {
    at::Tensor weights;           // static variable selection [B, 1+S]
    at::Tensor selection;         // c_s, steering the selection of past and future inputs
    at::Tensor enrichment;        // c_e, for static enrichment
    at::Tensor state_h, state_c;  // c_h, c_c: the encoder LSTM's initial state [layers, B, hidden]
  };
  struct SelectedInputs {
    VariableSelectionOutput past;    // [B, L, hidden], weights [B, L, O+K]
    VariableSelectionOutput future;  // [B, H, hidden], weights [B, H, K]
  };
  struct SequenceOutputs {
    at::Tensor encoder, decoder;  // the LSTMs' outputs over past and future positions
  };
  struct AttentionOutputs {
    at::Tensor gated;    // [B, H, hidden] after the gate over attention
    at::Tensor weights;  // [B, H, L+H]
  };
  // The forward's steps, in the order of the paper's figure 2.
  void check_inputs(const at::Tensor& observed, const at::Tensor& known, const at::Tensor& symbol,
                    const at::Tensor& statics) const;
  StaticContexts encode_statics(const at::Tensor& symbol, const at::Tensor& statics,
                                const memory::BlockCheckpointing& blocks);
  SelectedInputs select_inputs(const at::Tensor& observed, const at::Tensor& known, const at::Tensor& context,
                               const memory::BlockCheckpointing& blocks);
  SequenceOutputs encode_decode(const SelectedInputs& selected, const StaticContexts& statics,
                                const memory::BlockCheckpointing& blocks);
  at::Tensor gate_lstm(const SequenceOutputs& sequence, const SelectedInputs& selected,
                       const memory::BlockCheckpointing& blocks);
  at::Tensor enrich(const at::Tensor& temporal, const at::Tensor& context_enrichment,
                    const memory::BlockCheckpointing& blocks);
  AttentionOutputs attend(const at::Tensor& enriched, const memory::BlockCheckpointing& blocks);
  at::Tensor output_quantiles(const AttentionOutputs& attention, const at::Tensor& temporal,
                              const memory::BlockCheckpointing& blocks);

  // One kind of input's embeddings: its reals, then its categoricals.
  struct InputKind {
    std::vector<DenseImpl*> reals;
    std::vector<CategoricalEmbeddingImpl*> categoricals;
  };
  static InputKind input_kind(torch::nn::ModuleList& reals, torch::nn::ModuleList& categoricals);
  // Every embedding of `kinds` (raw[k]: kind k's columns) through its observer, the step's
  // one observation.
  static void observe_input_embeddings(const std::vector<InputKind>& kinds, const Tensors& raw);
  // Variables [first, first + count) of `kinds` in order (raw[k]: kind k's columns), embedded
  // [..., count, width] with their observers' stored parameters.
  static at::Tensor embed_variables(const std::vector<InputKind>& kinds, const Tensors& raw, int64_t first,
                                    int64_t count);
  void enable_qat();
  at::Tensor embed_symbol(const at::Tensor& symbol);
  // The LSTM's weights as its kernel takes them (fake-quantized matrices under QAT).
  std::vector<at::Tensor> lstm_weights(torch::nn::LSTM& lstm);
  // at::lstm over `input` from state (h, c): {output, h, c}.
  std::vector<at::Tensor> lstm_step(const torch::nn::LSTM& lstm, const at::Tensor& input, const at::Tensor& h,
                                    const at::Tensor& c, at::TensorList weights);
  // Steps per time chunk of the encoder LSTM.
  int64_t encoder_chunk_length() const;

  TftOptions options_;
  memory::CheckpointPolicy checkpoint_policy_ = memory::CheckpointPolicy::None;
  Precision precision_ = Precision::Fp32;
  bool weights_prequantized_ = false;
};
TORCH_MODULE(TemporalFusionTransformer);

}  // namespace qtft::model
