#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <string>

#include "qtft/data/dataset.h"
#include "qtft/infer/model_file.h"
#include "qtft/model/tft.h"

namespace qtft::infer {

// "cpu", "cuda" or "auto" (CUDA when a GPU is usable); "cuda" without one is an error.
c10::Device resolve_device(const std::string& name);

// Options that fit the dataset (its inputs, symbols, encoder length and horizon), with the
// architecture at its defaults for the caller to set.
model::TftOptions model_options_for(const data::Dataset& dataset);

// Builds a model with weights initialized from `seed`, so the same seed gives the same
// starting point on every run. The initialization draws from a stream of its own
// (memory::CpuRandomStream): the process's generators are left as they were.
model::TemporalFusionTransformer build_model(const model::TftOptions& options, uint64_t seed);

// How a model loaded from an int8 file multiplies: `integer` runs every product it can in
// integers (TemporalFusionTransformer::use_integer_products), on the CPU; `dequantized`
// multiplies the integers times their scales in float, bitwise what the QAT model it was
// exported from computes. Other model files ignore it.
enum class Int8Kernels { integer, dequantized };
// Parses "integer" or "dequantized"; anything else throws UsageError naming `flag`.
Int8Kernels parse_int8_kernels(const std::string& name, const std::string& flag);

// A model file and the model rebuilt from it with its (best) weights, on `device`.
struct LoadedModel {
  ModelFile file;
  model::TemporalFusionTransformer model;
  // For an int8 file: how many products run in integers, and why none do when none do
  // (dequantized kernels asked for, a CUDA device, no usable backend).
  model::TemporalFusionTransformerImpl::IntegerProductSummary integer_products;
  std::string float_products_reason;
};
LoadedModel load_model(const std::filesystem::path& path, c10::Device device,
                       Int8Kernels int8_kernels = Int8Kernels::integer);
// The same from a file already read (load_model_file); `source` names it in errors.
LoadedModel model_from_file(ModelFile file, const std::string& source, c10::Device device,
                            Int8Kernels int8_kernels = Int8Kernels::integer);
// One line on how an int8 file's model multiplies ("integer products: 60 of 113 Dense
// layers", with how many more would saturate the kernel, or why all stay in float); empty
// for other models.
std::string describe_int8_kernels(const LoadedModel& loaded);

// The loaded model with QAT turned on at the given bit widths, keeping its weights (and its
// observers when it already had QAT at the same widths). Used to fine-tune an FP32 model
// with QAT and for post-training quantization.
void convert_to_qat(LoadedModel& loaded, int64_t weight_bits, int64_t activation_bits, c10::Device device);
// A QAT model of `options`' architecture at these bit widths holding `weights` (an FP32
// model's; a QAT model's observer state is left out, so its observers start fresh), on
// `device`. `source` names the weights in errors.
model::TemporalFusionTransformer quantized_model(model::TftOptions options, const NamedTensors& weights,
                                                 int64_t weight_bits, int64_t activation_bits, c10::Device device,
                                                 const std::string& source);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace qtft::infer
