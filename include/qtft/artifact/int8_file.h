#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "qtft/artifact/model_file.h"

namespace qtft::io {
struct TensorFile;
}
namespace qtft::model {
class TemporalFusionTransformerImpl;
}

namespace qtft::artifact {

// An int8 export of a QAT model (`qtft export-int8`), a safetensors file with
//   int8.<name>             I8 [rows, cols]; at 4 bits U8 [rows, ceil(cols / 2)], two
//                           values per byte, the first in the low nibble, two's complement
//   int8.<name>.scale       F32 [rows]: one scale per output channel
//   int8.<name>.zero_point  I8 [rows]: all 0 (the weights are quantized symmetrically)
// for every weight that QAT quantizes per channel (TemporalFusionTransformer::
// per_channel_quantized_weights), every other weight and each observer's state (scale,
// zero point, running min and max) in float under model.<name> as in a model file, the
// model file's configuration, features and dataset metadata, and qtft.int8, a JSON object
// {"weight_bits": b, "shapes": {name: [rows, cols]}}. Plain integers and float scales, not a
// kernel library's packed form, so that the file outlives any backend. No training state.
inline constexpr const char* kInt8Format = "qtft-int8-1";

struct Int8ExportSummary {
  int64_t quantized_tensors = 0;  // weights stored as integers
  int64_t quantized_values = 0;   // their elements
  int64_t float_values = 0;       // elements of the tensors kept in float
  uint64_t file_bytes = 0;
  // What the same tensors take in float32, headers aside: 4 x (quantized + float values).
  uint64_t fp32_bytes() const { return 4 * static_cast<uint64_t>(quantized_values + float_values); }
};

// Writes the int8 export of a QAT model file, atomically. The integers are exactly the
// ones QAT's weight fake quantization rounds to, so the integers times their scales are
// bitwise the weights the fake-quantized model multiplies by. Throws qtft::Error naming
// `source` when the model is not a QAT model, or when one of its observers never saw data
// (its scale would be a placeholder): calibrate first (`qtft quantize`, or train with
// --use-qat).
Int8ExportSummary export_int8_file(const ModelFile& qat_model, const std::string& source,
                                   const std::filesystem::path& output);

// Throws qtft::Error naming `source` and the first observers of `model` that never saw
// data: their scales are placeholders, which no quantized file may carry.
void check_observers_calibrated(torch::nn::Module& model, const std::string& source);

// The integers and per-channel scales of every weight that `model` (a QAT model, its
// weights in float) fake-quantizes per channel, by weight name: what an int8 export stores,
// integers times scales bitwise the fake-quantized weight (checked; qtft::Error naming
// `source` and the weight otherwise).
std::map<std::string, quant::QuantizedWeight> per_channel_integers(const model::TemporalFusionTransformerImpl& model,
                                                                   const std::string& source);

// What an int8 export's integers are, once read.
struct Int8Weights {
  int64_t weight_bits = 8;
  // By weight name (as in TemporalFusionTransformer::per_channel_quantized_weights), at 4
  // bits unpacked to one int8 per value.
  std::map<std::string, quant::QuantizedWeight> weights;
};

// For load_model_file: checks every int8.* tensor of an int8 export against qtft.int8
// (dtype, shape, values in the weight range, finite positive scales, zero points of 0, no
// tensor missing or left over), then replaces them by float weights under model.<name>
// and returns the integers themselves, for integer products. Throws qtft::Error naming
// `source` and the tensor at fault.
Int8Weights dequantize_int8_tensors(io::TensorFile& file, const std::string& source);

}  // namespace qtft::artifact
