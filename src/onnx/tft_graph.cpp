#include "tft_graph.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "qtft/model/model_inputs.h"
#include "qtft/quant/detail/weight_fake_quant.h"

namespace qtft::onnx_export {
namespace {

using ONNX_NAMESPACE::TensorProto;
using Values = std::vector<std::string>;

// ONNX's LSTM orders a layer's four gates input, output, forget, cell; LibTorch's input,
// forget, cell, output.
at::Tensor onnx_gate_order(const at::Tensor& torch_gates) {
  const auto gates = torch_gates.chunk(4, 0);
  return at::cat({gates[0], gates[3], gates[1], gates[2]}, 0);
}

class TftEmitter {
 public:
  TftEmitter(GraphBuilder& g, model::TemporalFusionTransformerImpl& m,
             const std::map<std::string, quant::QuantizedWeight>* integers)
      : g_(g), m_(m), integers_(integers) {
    for (const auto& item : m_.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
      paths_[item.value().get()] = item.key();
    }
  }

  TftGraphCounts emit(const TargetScaling& scaling);

 private:
  using Module = torch::nn::Module;
  const std::string& path(const Module& module) const { return paths_.at(&module); }

  // Shapes and small operators.
  // A slice of an observer's output is still on its grid: a product it feeds stays
  // quantized (the known inputs, embedded once and sliced into past and future).
  std::string slice(const std::string& x, int64_t axis, int64_t start, int64_t end, const std::string& hint) {
    std::string part =
        g_.node("Slice", {x, g_.int64s("start", {start}), g_.int64s("end", {end}), g_.int64s("axis", {axis})}, hint);
    if (observed_.count(x) > 0) observed_.insert(part);
    return part;
  }
  std::string unsqueeze(const std::string& x, int64_t axis) {
    return g_.node("Unsqueeze", {x, g_.int64s("axes", {axis})}, "unsqueeze");
  }
  std::string squeeze(const std::string& x, int64_t axis) {
    return g_.node("Squeeze", {x, g_.int64s("axes", {axis})}, "squeeze");
  }
  std::string concat(const Values& parts, int64_t axis, const std::string& hint) {
    return parts.size() == 1 ? parts.front() : g_.node("Concat", parts, hint, {{"axis", axis}});
  }

  // An observer's fake quantization as QuantizeLinear then DequantizeLinear, with its
  // stored scale and zero point; a Clip between them when its codes end below 255.
  std::string observe(const quant::ActivationFakeQuant& holder, const std::string& x) {
    if (integers_ == nullptr || holder.is_empty()) return x;  // a float graph, or a layer without observer
    const quant::ActivationFakeQuantImpl* observer = holder.get();
    const std::string& name = path(*observer);
    const quant::QParams p = observer->qparams();
    const quant::QuantRange range = observer->range();
    const std::string scale = g_.scalar(name + ".scale", static_cast<float>(p.scale));
    const std::string zero_point =
        g_.constant(name + ".zero_point", at::tensor({static_cast<uint8_t>(p.zero_point)}).reshape({}));
    std::string q = g_.node("QuantizeLinear", {x, scale, zero_point}, name + ".q");
    if (range.qmin != 0 || range.qmax != 255) {
      q = g_.node("Clip",
                  {q, g_.constant("qmin", at::tensor({static_cast<uint8_t>(range.qmin)}).reshape({})),
                   g_.constant("qmax", at::tensor({static_cast<uint8_t>(range.qmax)}).reshape({}))},
                  name + ".clip");
    }
    ++counts_.quantized_activations;
    return *observed_.insert(g_.node("DequantizeLinear", {q, scale, zero_point}, name + ".dq")).first;
  }

  // How a weight [rows, cols] (rows: output channels) enters the graph: as a table, or
  // transposed for MatMul ([in, out]); int8 behind a DequantizeLinear, or the weight the
  // model multiplies by, in float.
  enum class Layout { Table, MatMulOperand };
  enum class Storage { Int8, Float };
  std::string weight(const std::string& name, const at::Tensor& in_use, Layout layout, Storage storage) {
    const bool transpose = layout == Layout::MatMulOperand;
    if (storage == Storage::Float) {
      ++counts_.float_weights;
      return g_.constant(name, transpose ? in_use.t() : in_use);
    }
    const auto it = integers_->find(name);
    TORCH_CHECK(it != integers_->end(), "ONNX export: no integers for the weight ", name);
    const at::Tensor& values = it->second.values;
    const at::Tensor& scales = it->second.scales;
    ++(transpose ? counts_.int8_products : counts_.int8_tables);
    return g_.node("DequantizeLinear",
                   {g_.constant(name + ".int8", transpose ? values.t() : values), g_.constant(name + ".scale", scales),
                    g_.constant(name + ".zero_point", at::zeros({scales.size(0)}, at::kChar))},
                   name + ".dq", {{"axis", int64_t{transpose ? 1 : 0}}});
  }

  // A Dense layer. Under QDQ its product is quantized on both sides when its input is an
  // observer's output, as an int8 file's integer products are; otherwise the input is a
  // float (an ELU, a layer norm) and the weight stays float too, fake-quantized, as qtft
  // multiplies it (ONNX Runtime would quantize such an input on the fly, and round otherwise).
  std::string dense(model::DenseImpl& d, const std::string& x) {
    const std::string& name = path(d);
    const bool input_on_a_grid = integers_ != nullptr && observed_.count(x) > 0;
    const std::string w = weight(name + ".linear.weight", d.weight_in_use(), Layout::MatMulOperand,
                                 input_on_a_grid ? Storage::Int8 : Storage::Float);
    std::string y = g_.node("MatMul", {x, w}, name + ".matmul");
    if (d.linear->bias.defined()) y = g_.node("Add", {y, g_.constant(name + ".bias", d.linear->bias)}, name + ".add");
    return observe(d.output_quant, y);
  }

  std::string layer_norm(torch::nn::LayerNormImpl& norm, const std::string& x) {
    const std::string& name = path(norm);
    return g_.node("LayerNormalization",
                   {x, g_.constant(name + ".weight", norm.weight), g_.constant(name + ".bias", norm.bias)}, name,
                   {{"axis", int64_t{-1}}, {"epsilon", static_cast<float>(norm.options.eps())}});
  }

  // skip + sigmoid(gate_fc(x)) * fc(x), the GLU added to a residual.
  std::string gated_sum(model::GatedLinearUnitImpl& glu, const std::string& skip, const std::string& x) {
    const std::string gate = g_.node("Sigmoid", {dense(*glu.gate_fc, x)}, path(glu) + ".sigmoid");
    const std::string value = g_.node("Mul", {gate, dense(*glu.fc, x)}, path(glu) + ".mul");
    return g_.node("Add", {skip, value}, path(glu) + ".add");
  }

  std::string gate_add_norm(model::GateAddNormImpl& gan, const std::string& x, const std::string& skip) {
    return layer_norm(*gan.layer_norm, gated_sum(*gan.glu, skip, x));
  }

  // A GRN over `a` of rank `rank`, with a context of rank 2 [B, C] when it takes one.
  std::string grn(model::GatedResidualNetworkImpl& grn, const std::string& a, int64_t rank,
                  const std::string& context = "") {
    std::string hidden = dense(*grn.fc1, a);
    if (grn.context_projection) {
      TORCH_CHECK(!context.empty(), "ONNX export: ", path(grn), " needs a context");
      std::string c = dense(*grn.context_projection, context);
      for (int64_t r = 2; r < rank; ++r) c = unsqueeze(c, -2);
      hidden = g_.node("Add", {hidden, c}, path(grn) + ".context");
    }
    hidden = dense(*grn.fc2, g_.node("Elu", {hidden}, path(grn) + ".elu", {{"alpha", 1.0f}}));
    const std::string skip = grn.skip_projection ? dense(*grn.skip_projection, a) : a;
    return layer_norm(*grn.layer_norm, gated_sum(*grn.gate, skip, hidden));
  }

  // The selection over `variables` (each [..., width], of rank `rank`): softmax weights
  // from the flattened GRN, the weighted sum of each variable's GRN, then the projection
  // to the hidden size.
  std::string select(model::VariableSelectionNetworkImpl& vsn, const Values& variables, int64_t rank,
                     const std::string& context = "") {
    const std::string& name = path(vsn);
    auto variable_grn = [&](size_t i) -> model::GatedResidualNetworkImpl& {
      return vsn.variable_grns->at<model::GatedResidualNetworkImpl>(i);
    };
    std::string selected;
    if (!vsn.flattened_grn) {
      selected = grn(variable_grn(0), variables.front(), rank);
    } else {
      const std::string flat = concat(variables, -1, name + ".flattened");
      const std::string weights = g_.node("Softmax", {grn(*vsn.flattened_grn, flat, rank, context)}, name + ".weights",
                                          {{"axis", int64_t{-1}}});
      Values processed;
      for (size_t i = 0; i < variables.size(); ++i)
        processed.push_back(unsqueeze(grn(variable_grn(i), variables[i], rank), -2));
      const std::string weighted =
          g_.node("Mul", {concat(processed, -2, name + ".stacked"), unsqueeze(weights, -1)}, name + ".weighted");
      selected = g_.node("ReduceSum", {weighted, g_.int64s("axes", {-2})}, name + ".sum", {{"keepdims", int64_t{0}}});
    }
    return vsn.output_projection ? dense(*vsn.output_projection, selected) : selected;
  }

  // Each input of one kind embedded, [..., width] apiece: its reals (columns [0, reals) of
  // `raw`), then its categoricals (the columns after, level indices).
  Values embed_kind(torch::nn::ModuleList& reals, torch::nn::ModuleList& categoricals, const std::string& raw) {
    Values out;
    const auto real_count = static_cast<int64_t>(reals->size());
    for (int64_t i = 0; i < real_count; ++i) {
      auto& layer = reals->at<model::DenseImpl>(static_cast<size_t>(i));
      out.push_back(dense(layer, slice(raw, -1, i, i + 1, path(layer) + ".column")));
    }
    for (size_t j = 0; j < categoricals->size(); ++j) {
      auto& embedding = categoricals->at<model::CategoricalEmbeddingImpl>(j);
      const int64_t column = real_count + static_cast<int64_t>(j);
      const std::string codes =
          g_.node("Cast", {squeeze(slice(raw, -1, column, column + 1, path(embedding) + ".column"), -1)},
                  path(embedding) + ".codes", {{"to", int64_t{TensorProto::INT64}}});
      out.push_back(observe(embedding.output_quant, lookup(*embedding.embedding, codes)));
    }
    return out;
  }

  std::string lookup(torch::nn::EmbeddingImpl& table, const std::string& codes) {
    // Under QDQ the table is its integers behind a DequantizeLinear; a float graph comes
    // from an FP32 model, whose tables are used as loaded.
    return g_.node("Gather",
                   {weight(path(table) + ".weight", table.weight, Layout::Table,
                           integers_ != nullptr ? Storage::Int8 : Storage::Float),
                    codes},
                   path(table) + ".gather", {{"axis", int64_t{0}}});
  }

  // One LSTM over `x` [B, T, hidden] from per-layer states; returns the output [B, T,
  // hidden] and each layer's final (h, c).
  struct LstmResult {
    std::string output;
    Values h, c;
  };
  LstmResult lstm(torch::nn::LSTM& rnn, const std::string& x, const Values& h0, const Values& c0);

  GraphBuilder& g_;
  model::TemporalFusionTransformerImpl& m_;
  const std::map<std::string, quant::QuantizedWeight>* integers_;
  std::map<const Module*, std::string> paths_;
  std::set<std::string> observed_;  // the values that are an observer's output (under QDQ)
  TftGraphCounts counts_;
};

TftEmitter::LstmResult TftEmitter::lstm(torch::nn::LSTM& rnn, const std::string& x, const Values& h0,
                                        const Values& c0) {
  const std::string& name = path(*rnn);
  const auto& o = m_.options();
  const int64_t hidden = o.hidden_size();
  // The matrices as the model multiplies by them: fake-quantized under QAT, as loaded from
  // an int8 file (already their integers times their scales). ONNX Runtime's QDQ has no
  // LSTM, so they stay float under QDQ too.
  auto in_use = [&](const at::Tensor& w) {
    return o.use_qat() && !m_.weights_prequantized() ? quant::fake_quantize_weight(w, o.weight_bits()) : w;
  };
  std::map<std::string, at::Tensor> params;
  for (const auto& p : rnn->named_parameters()) params[p.key()] = p.value().detach();
  LstmResult result;
  std::string sequence = g_.node("Transpose", {x}, name + ".time_major", {{"perm", std::vector<int64_t>{1, 0, 2}}});
  for (int64_t l = 0; l < o.lstm_layers(); ++l) {
    const std::string layer = "_l" + std::to_string(l);
    const at::Tensor w = onnx_gate_order(in_use(params.at("weight_ih" + layer))).unsqueeze(0);
    const at::Tensor r = onnx_gate_order(in_use(params.at("weight_hh" + layer))).unsqueeze(0);
    const at::Tensor b =
        at::cat({onnx_gate_order(params.at("bias_ih" + layer)), onnx_gate_order(params.at("bias_hh" + layer))})
            .unsqueeze(0);
    counts_.float_weights += 2;
    const Values outputs = g_.node("LSTM",
                                   {sequence, g_.constant(name + ".W" + layer, w), g_.constant(name + ".R" + layer, r),
                                    g_.constant(name + ".B" + layer, b), "", unsqueeze(h0[static_cast<size_t>(l)], 0),
                                    unsqueeze(c0[static_cast<size_t>(l)], 0)},
                                   3, name + layer, {{"hidden_size", hidden}});
    sequence = squeeze(outputs[0], 1);  // [T, 1 direction, B, hidden] -> [T, B, hidden]
    result.h.push_back(squeeze(outputs[1], 0));
    result.c.push_back(squeeze(outputs[2], 0));
  }
  result.output = g_.node("Transpose", {sequence}, name + ".batch_major", {{"perm", std::vector<int64_t>{1, 0, 2}}});
  return result;
}

TftGraphCounts TftEmitter::emit(const TargetScaling& scaling) {
  const auto& o = m_.options();
  const int64_t l = o.encoder_length(), h = o.horizon();
  const std::string batch = "batch";
  g_.input(model::kObservedInput, TensorProto::FLOAT, {-1, l, o.num_observed()}, batch);
  g_.input(model::kKnownInput, TensorProto::FLOAT, {-1, l + h, o.num_known()}, batch);
  g_.input(model::kSymbolInput, TensorProto::INT64, {-1}, batch);
  if (o.num_static() > 0) g_.input(model::kStaticsInput, TensorProto::FLOAT, {-1, o.num_static()}, batch);

  // Static covariate encoders: the symbol and the declared statics selected, four contexts.
  Values statics{observe(m_.symbol_embedding_output_quant, lookup(*m_.symbol_embedding, model::kSymbolInput))};
  if (o.num_static() > 0) {
    for (auto& e : embed_kind(m_.static_embeddings, m_.static_categorical_embeddings, model::kStaticsInput))
      statics.push_back(e);
  }
  const std::string static_embedding = select(*m_.static_vsn, statics, 2);
  const std::string context_selection = grn(*m_.static_context_variable_selection, static_embedding, 2);
  const std::string context_enrichment = grn(*m_.static_context_enrichment, static_embedding, 2);
  const std::string state_h = grn(*m_.static_context_state_h, static_embedding, 2);
  const std::string state_c = grn(*m_.static_context_state_c, static_embedding, 2);

  // Past inputs, observed then known, over the encoder; future inputs, known, over the
  // decoder. Each known input is embedded once over both and sliced.
  Values past;
  if (o.num_observed() > 0)
    past = embed_kind(m_.observed_embeddings, m_.observed_categorical_embeddings, model::kObservedInput);
  Values future;
  for (const auto& known : embed_kind(m_.known_embeddings, m_.known_categorical_embeddings, model::kKnownInput)) {
    past.push_back(slice(known, 1, 0, l, "known_past"));
    future.push_back(slice(known, 1, l, l + h, "known_future"));
  }
  const std::string selected_past = select(*m_.encoder_vsn, past, 3, context_selection);
  const std::string selected_future = select(*m_.decoder_vsn, future, 3, context_selection);

  // The sequence-to-sequence LSTM from (c_h, c_c), the decoder from the encoder's state.
  const Values initial_h(static_cast<size_t>(o.lstm_layers()), state_h);
  const Values initial_c(static_cast<size_t>(o.lstm_layers()), state_c);
  const LstmResult encoder = lstm(m_.lstm_encoder, selected_past, initial_h, initial_c);
  const LstmResult decoder = lstm(m_.lstm_decoder, selected_future, encoder.h, encoder.c);
  const std::string encoded = observe(m_.lstm_encoder_output_quant, encoder.output);
  const std::string decoded = observe(m_.lstm_decoder_output_quant, decoder.output);
  const std::string temporal = gate_add_norm(*m_.post_lstm_gate, concat({encoded, decoded}, 1, "lstm_output"),
                                             concat({selected_past, selected_future}, 1, "selected_inputs"));
  const std::string enriched = grn(*m_.static_enrichment, temporal, 3, context_enrichment);

  // Interpretable attention: decoder queries over every position, causal.
  auto& attention = *m_.temporal_attention;
  const int64_t heads = attention.options().num_heads(), d = attention.head_size();
  const std::string enriched_decoder = slice(enriched, 1, l, l + h, "enriched_decoder");
  const std::string q =
      g_.node("Transpose",
              {g_.node("Reshape", {dense(*attention.q_proj, enriched_decoder), g_.int64s("shape", {0, h, heads, d})},
                       "q_heads")},
              "q", {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
  const std::string k_t = g_.node(
      "Transpose",
      {g_.node("Reshape", {dense(*attention.k_proj, enriched), g_.int64s("shape", {0, l + h, heads, d})}, "k_heads")},
      "k_t", {{"perm", std::vector<int64_t>{0, 2, 3, 1}}});
  std::string scores = g_.node("Div",
                               {g_.node("MatMul", {q, k_t}, "scores_raw"),
                                g_.scalar("sqrt_head_size", static_cast<float>(std::sqrt(static_cast<double>(d))))},
                               "scores");
  // The causal mask as a constant: where a key lies after the query, -inf, so that its
  // probability is exactly 0.
  const at::Tensor mask = model::decoder_causal_mask(l, h, c10::Device(c10::kCPU));
  scores = g_.node(
      "Where",
      {g_.constant("causal_mask", mask), g_.scalar("minus_infinity", -std::numeric_limits<float>::infinity()), scores},
      "masked_scores");
  std::string probabilities = g_.node("Softmax", {scores}, "attention_probabilities", {{"axis", int64_t{-1}}});
  probabilities = observe(attention.probabilities_quant, probabilities);
  const std::string mixed = g_.node("ReduceMean", {probabilities}, "attention_mixed",
                                    {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  const std::string attended =
      dense(*attention.out_proj, g_.node("MatMul", {mixed, dense(*attention.v_proj, enriched)}, "attention_heads"));
  const std::string gated = gate_add_norm(*m_.post_attention_gate, attended, enriched_decoder);

  // Position-wise GRN, the skip over the transformer block, the quantiles.
  const std::string out = gate_add_norm(*m_.pre_output_gate, grn(*m_.positionwise_grn, gated, 3),
                                        slice(temporal, 1, l, l + h, "temporal_decoder"));
  const std::string quantiles = dense(*m_.quantile_outputs->output_layer, out);
  const auto nq = static_cast<int64_t>(o.quantiles().size());
  g_.output(quantiles, "quantiles", TensorProto::FLOAT, {-1, h, nq}, batch);

  // The target's units: each row scaled and centered by its symbol's statistics.
  auto per_row = [&](const std::vector<float>& table, const std::string& hint) {
    const std::string values = g_.constant(hint, at::tensor(table));
    return g_.node("Reshape",
                   {g_.node("Gather", {values, model::kSymbolInput}, hint + "_of_row", {{"axis", int64_t{0}}}),
                    g_.int64s("shape", {-1, 1, 1})},
                   hint + "_per_row");
  };
  const std::string in_units =
      g_.node("Add",
              {g_.node("Mul", {quantiles, per_row(scaling.scale, "target_scale")}, "scaled_back"),
               per_row(scaling.center, "target_center")},
              "centered");
  g_.output(in_units, "quantiles_target_units", TensorProto::FLOAT, {-1, h, nq}, batch);
  return counts_;
}

}  // namespace

TftGraphCounts emit_tft(GraphBuilder& graph, model::TemporalFusionTransformerImpl& model,
                        const std::map<std::string, quant::QuantizedWeight>* integers, const TargetScaling& scaling) {
  return TftEmitter(graph, model, integers).emit(scaling);
}

}  // namespace qtft::onnx_export
