#pragma once

// The TFT's forward pass (model/tft.cpp, in evaluation) written as ONNX nodes: every module
// as the operators that compute it, with the model's weights as constants.
#include <map>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "qtft/model/tft.h"
#include "qtft/quant/int8_linear.h"

namespace qtft::onnx_export {

// How the target's scaled units map back to its own, per symbol id: value * scale + center.
struct TargetScaling {
  std::vector<float> scale, center;
};

// What the graph holds, by how it computes.
struct TftGraphCounts {
  int64_t quantized_activations = 0;  // QuantizeLinear/DequantizeLinear pairs, one per observer use
  int64_t int8_products = 0;          // MatMuls whose weight is int8 behind a DequantizeLinear
  int64_t int8_tables = 0;            // embedding tables, int8 behind a DequantizeLinear
  int64_t float_weights = 0;          // matrices and tables kept in float (the LSTMs' under QDQ)
};

// Emits `model` into `graph`: the inputs of model/model_inputs.h, batch dynamic, encoder
// length and horizon fixed; outputs "quantiles" [B, H, Q] (the model's scaled units) and
// "quantiles_target_units" (scaled back with `scaling`, by each row's symbol). With
// `integers` (a QAT or int8 model's per-channel weights, artifact::per_channel_integers),
// the graph is QDQ: each observer a QuantizeLinear/DequantizeLinear pair with its scale and
// zero point; each embedding table, and the weight of each Dense layer whose input is an
// observer's output, int8 behind a DequantizeLinear with its per-channel scales. The other
// Dense weights and the LSTMs' matrices stay float, as qtft multiplies them (fake-quantized).
// Without `integers`, the graph is float.
TftGraphCounts emit_tft(GraphBuilder& graph, model::TemporalFusionTransformerImpl& model,
                        const std::map<std::string, quant::QuantizedWeight>* integers, const TargetScaling& scaling);

}  // namespace qtft::onnx_export
