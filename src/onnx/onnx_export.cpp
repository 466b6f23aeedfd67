#include "qtft/onnx/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "qtft/artifact/int8_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/infer/forecast.h"
#include "qtft/io/atomic_file.h"
#include "qtft/version.h"
#include "tft_graph.h"

namespace qtft::onnx_export {
namespace {

nlohmann::json names_of(const std::vector<data::SchemaInput>& inputs) {
  nlohmann::json names = nlohmann::json::array();
  for (const auto& input : inputs) names.push_back(input.name);
  return names;
}

// What travels with the graph as metadata properties: the model file's own (configuration,
// input schema, windows, lineage), and what a serving system reads first.
std::map<std::string, std::string> graph_metadata(const artifact::ModelFile& file, const std::string& kind, bool qdq) {
  auto metadata = artifact::model_file_metadata(file, "qtft-onnx-1");
  metadata["qtft.version"] = QTFT_VERSION_STRING;
  metadata["qtft.model_kind"] = kind;
  metadata["qtft.graph"] = qdq ? "qdq" : "float";
  metadata["qtft.quantiles"] = nlohmann::json(file.options.quantiles()).dump();
  metadata["qtft.encoder_length"] = std::to_string(file.dataset.encoder_length);
  metadata["qtft.horizon"] = std::to_string(file.dataset.horizon);
  // The columns of each input, in order, and the symbols by id.
  const auto& schema = file.features;
  metadata["qtft.inputs"] = nlohmann::json{
      {"observed", names_of(schema.observed)},
      {"known", names_of(schema.known)},
      {"statics", names_of(schema.statics)},
      {"symbol",
       schema.symbols}}.dump();
  return metadata;
}

TargetScaling target_scaling(const artifact::ModelFile& file) {
  TargetScaling scaling;
  for (int64_t id = 0; id < file.options.num_symbols(); ++id) {
    const infer::TargetUnits units = infer::target_units(file.features, id);
    scaling.scale.push_back(static_cast<float>(units.scale));
    scaling.center.push_back(static_cast<float>(units.center));
  }
  return scaling;
}

// The ONNX library's checker, then shape inference with type checks that throws on any
// node's error (the Python checker's full check), on a copy: the file keeps no inferred shapes.
void check_graph(const ONNX_NAMESPACE::ModelProto& model, const std::string& source) {
  try {
    ONNX_NAMESPACE::checker::check_model(model);
    ONNX_NAMESPACE::ModelProto inferred = model;
    ONNX_NAMESPACE::shape_inference::InferShapes(inferred, ONNX_NAMESPACE::OpSchemaRegistry::Instance(),
                                                 ONNX_NAMESPACE::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw Error(source + ": the ONNX checker refused the exported graph (a bug in qtft's export): " + e.what());
  }
}

}  // namespace

OnnxExportSummary export_onnx(const std::filesystem::path& model_path, const std::filesystem::path& output,
                              const OnnxExportOptions& options) {
  const std::string source = model_path.string();
  // Before any work: the folder must exist and the path must not be one.
  const auto folder = output.parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder)) {
    throw Error(output.string() + ": the folder " + folder.string() + " does not exist; nothing was written");
  }
  if (std::filesystem::is_directory(output)) {
    throw Error(output.string() + ": is a folder; give the graph's file name (model.onnx)");
  }
  // Dequantized kernels: the int8 file's weights as their integers times their scales, the
  // integers kept beside them.
  auto loaded = artifact::load_model(model_path, c10::Device(c10::kCPU), artifact::Int8Kernels::dequantized);
  auto& model = *loaded.model;
  model.eval();
  const auto& file = loaded.file;
  const std::string kind = file.int8_weights ? "int8" : file.options.use_qat() ? "qat" : "fp32";
  if (kind == "fp32" && options.int8) {
    throw UsageError("--int8: " + source +
                     " is an FP32 model with no observers, so there is no quantization to export; train it with "
                     "--use-qat, or quantize it first (qtft quantize)");
  }
  const bool qdq = kind != "fp32";
  std::map<std::string, quant::QuantizedWeight> integers;
  if (qdq) {
    artifact::check_observers_calibrated(model, source);
    integers = file.int8_weights ? file.quantized_weights : artifact::per_channel_integers(model, source);
  }

  ONNX_NAMESPACE::ModelProto proto;
  proto.set_ir_version(ONNX_NAMESPACE::IR_VERSION);
  proto.set_producer_name("qtft");
  proto.set_producer_version(QTFT_VERSION_STRING);
  auto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  auto* graph = proto.mutable_graph();
  graph->set_name("qtft_tft");
  GraphBuilder builder(*graph);
  const TftGraphCounts counts = emit_tft(builder, model, qdq ? &integers : nullptr, target_scaling(file));
  for (const auto& [key, value] : graph_metadata(file, kind, qdq)) {
    auto* property = proto.add_metadata_props();
    property->set_key(key);
    property->set_value(value);
  }
  check_graph(proto, source);

  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw Error(source + ": the ONNX graph could not be serialized");
  io::write_file_atomically(output, bytes);

  OnnxExportSummary summary;
  summary.model_kind = kind;
  summary.qdq = qdq;
  summary.operators = builder.operator_counts();
  summary.nodes = graph->node_size();
  summary.quantized_activations = counts.quantized_activations;
  summary.int8_products = counts.int8_products;
  summary.int8_tables = counts.int8_tables;
  summary.float_weights = counts.float_weights;
  summary.file_bytes = bytes.size();
  return summary;
}

}  // namespace qtft::onnx_export
