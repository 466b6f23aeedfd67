#pragma once

// `qtft export-onnx`: a model file as an ONNX graph that any ONNX runtime runs. The graph
// is built with the ONNX library's own classes (Debian's libonnx) and checked by its
// checker before it is written; no ONNX or protobuf type appears here, so that callers
// build against plain C++. docs/DEPLOYMENT.md describes the graph.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace qtft::onnx_export {

// The one opset every export targets: LayerNormalization first appears in it, and Debian
// 12's ONNX (1.12) checks up to it.
inline constexpr int64_t kOpset = 17;

struct OnnxExportOptions {
  // Asks for the QDQ graph explicitly. A QAT or int8 file exports as QDQ either way (its
  // quantization is the model); on an FP32 file, which has no observers, it is refused.
  bool int8 = false;
};

struct OnnxExportSummary {
  std::string model_kind;  // "fp32", "qat" or "int8": what the file held
  bool qdq = false;        // the graph's products quantized (QuantizeLinear/DequantizeLinear)
  int64_t nodes = 0;
  std::map<std::string, int64_t> operators;  // nodes per operator
  int64_t quantized_activations = 0;         // QuantizeLinear/DequantizeLinear pairs
  int64_t int8_products = 0;                 // matrix products whose weight is int8
  int64_t int8_tables = 0;                   // embedding tables in int8
  int64_t float_weights = 0;                 // weight matrices and tables in float
  uint64_t file_bytes = 0;
};

// Writes the ONNX graph of the model file `model_path` (FP32, QAT or int8) to `output`,
// atomically, after the ONNX checker and strict shape inference have passed it. Throws
// qtft::Error naming the file: not a model file, observers that never saw data (a QAT or
// int8 file), an output folder that does not exist; qtft::UsageError naming --int8, --use-qat
// and qtft quantize for `int8` on an FP32 file.
OnnxExportSummary export_onnx(const std::filesystem::path& model_path, const std::filesystem::path& output,
                              const OnnxExportOptions& options = {});

}  // namespace qtft::onnx_export
