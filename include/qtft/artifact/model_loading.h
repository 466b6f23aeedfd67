#pragma once

#include <c10/core/Device.h>

#include <filesystem>
#include <string>

#include "qtft/artifact/int8_kernels.h"
#include "qtft/artifact/model_file.h"
#include "qtft/common/device_choice.h"
#include "qtft/data/features/dataset.h"
#include "qtft/model/tft.h"

namespace qtft::artifact {

// The device a choice names: Auto is CUDA when a GPU is usable; Cuda without one is an error.
c10::Device resolve_device(DeviceChoice choice);
// The same from --device's text: "cpu", "cuda" or "auto".
c10::Device resolve_device(const std::string& name);

// A model file and the model rebuilt from it with its (best) weights, on `device`.
struct LoadedModel {
  ModelFile file;
  model::TemporalFusionTransformer model;
  // Where the model is: the device asked for, except for an int8 file with integer products,
  // which run on the CPU only (serving_device). Run its batches here.
  c10::Device device = c10::Device(c10::kCPU);
  // Why `device` is not the one asked for; empty when it is.
  std::string device_note;
  // For an int8 file: how many products run in integers, and why none do when none do
  // (dequantized kernels asked for, a CUDA device, no usable backend).
  model::TemporalFusionTransformerImpl::IntegerProductSummary integer_products;
  std::string float_products_reason;
};
// The device a model file runs on when `device` is asked for: that device, except that an
// int8 file whose integer products are wanted stays on the CPU, where they run (a GPU would
// multiply in float: --int8-kernels dequantized asks for that).
c10::Device serving_device(c10::Device device, const ModelFile& file, Int8Kernels int8_kernels);
LoadedModel load_model(const std::filesystem::path& path, c10::Device device,
                       Int8Kernels int8_kernels = Int8Kernels::integer);
// The same from a file already read (load_model_file); `source` names it in errors.
LoadedModel model_from_file(ModelFile file, const std::string& source, c10::Device device,
                            Int8Kernels int8_kernels = Int8Kernels::integer);
// One line on how an int8 file's model multiplies ("integer products: 60 of 113 Dense
// layers", with how many more would saturate the kernel, or why all stay in float, and the
// device note when it runs on the CPU though a GPU was asked for); empty for other models.
std::string describe_int8_kernels(const LoadedModel& loaded);
// Runs the loaded model's products in `precision` (TemporalFusionTransformerImpl::set_precision);
// the file is not changed. Throws UsageError for bf16 on an int8 file (its products are
// integer or dequantized int8, not FP32 ones to narrow) or on a CPU without BF16 instructions.
void use_precision(LoadedModel& loaded, Precision precision, const std::string& source);

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

}  // namespace qtft::artifact
