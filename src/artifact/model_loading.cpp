#include "qtft/artifact/model_loading.h"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"
#include "qtft/memory/autocast.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"

namespace qtft::artifact {

c10::Device resolve_device(DeviceChoice choice) {
  if (choice == DeviceChoice::Cpu) return c10::Device(c10::kCPU);
  if (torch::cuda::is_available()) return c10::Device(c10::kCUDA, 0);
  if (choice == DeviceChoice::Auto) return c10::Device(c10::kCPU);
  throw UsageError("--device cuda: no usable CUDA GPU on this machine (use --device cpu or auto)");
}

c10::Device resolve_device(const std::string& name) { return resolve_device(parse_device_choice(name, "--device")); }

namespace {
constexpr EnumNames<Int8Kernels, 2> kInt8Kernels{
    {{Int8Kernels::integer, "integer"}, {Int8Kernels::dequantized, "dequantized"}}};
}  // namespace

Int8Kernels parse_int8_kernels(const std::string& name, const std::string& flag) {
  return parse_enum(kInt8Kernels, name, flag);
}

const char* int8_kernels_name(Int8Kernels kernels) { return enum_name(kInt8Kernels, kernels); }

LoadedModel load_model(const std::filesystem::path& path, c10::Device device, Int8Kernels int8_kernels) {
  return model_from_file(load_model_file(path), path.string(), device, int8_kernels);
}

c10::Device serving_device(c10::Device device, const ModelFile& file, Int8Kernels int8_kernels) {
  if (file.int8_weights && int8_kernels == Int8Kernels::integer) return c10::Device(c10::kCPU);
  return device;
}

LoadedModel model_from_file(ModelFile file, const std::string& source, c10::Device asked, Int8Kernels int8_kernels) {
  const c10::Device device = serving_device(asked, file, int8_kernels);
  std::string device_note;
  if (device != asked) {
    device_note = "on the CPU, where integer products run, not on " + asked.str() +
                  " (--int8-kernels dequantized multiplies in float there)";
  }
  // The initial weights are overwritten; building them draws from a stream of its own.
  auto model = model::build_model(file.options, 0);
  copy_weights_into(*model, file.weights, source);
  model::TemporalFusionTransformerImpl::IntegerProductSummary integer_products;
  std::string float_products_reason;
  if (file.int8_weights) {
    model->set_weights_prequantized(true);
    const std::string backend = quant::Int8Linear::unavailable_reason();
    if (int8_kernels == Int8Kernels::dequantized) {
      float_products_reason = "dequantized kernels were asked for";
    } else if (!backend.empty()) {
      float_products_reason = backend;
    } else {
      integer_products = model->use_integer_products(file.quantized_weights);
    }
  }
  model->to(device);
  return {std::move(file),        std::move(model), device,
          std::move(device_note), integer_products, std::move(float_products_reason)};
}

void use_precision(LoadedModel& loaded, Precision precision, const std::string& source) {
  if (precision != Precision::Fp32 && loaded.file.int8_weights) {
    throw UsageError("--precision " + std::string(precision_name(precision)) + ": " + source +
                     " is an int8 export, whose products run in integers or dequantized; run the FP32 or QAT file "
                     "it came from in " +
                     precision_name(precision) + ", or this one without --precision");
  }
  memory::require_precision_support(precision, loaded.device);
  loaded.model->set_precision(precision);
}

std::string describe_int8_kernels(const LoadedModel& loaded) {
  if (!loaded.file.int8_weights) return {};
  const std::string where = loaded.device_note.empty() ? "" : ", " + loaded.device_note;
  if (!loaded.float_products_reason.empty()) return "int8 products in float: " + loaded.float_products_reason + where;
  const auto& s = loaded.integer_products;
  std::string line = "integer products: " + std::to_string(s.products.in_use) + " of " +
                     std::to_string(s.dense_layers) + " Dense layers";
  if (s.products.in_use < s.products.eligible) {
    line += " (" + std::to_string(s.products.eligible - s.products.in_use) +
            " more would saturate this CPU's kernel at " + std::to_string(loaded.file.options.activation_bits()) +
            "-bit activations; they stay in float)";
  }
  return line + where;
}

void convert_to_qat(LoadedModel& loaded, int64_t weight_bits, int64_t activation_bits, c10::Device device) {
  auto& options = loaded.file.options;
  if (loaded.file.int8_weights) {
    throw Error("an int8 export is quantized already; quantize the model it was exported from");
  }
  if (options.use_qat() && options.weight_bits() == weight_bits && options.activation_bits() == activation_bits) return;
  // A QAT model at other bit widths keeps its weights but starts with fresh observers.
  loaded.model =
      quantized_model(options, named_weights(*loaded.model), weight_bits, activation_bits, device, "converting to QAT");
  options.use_qat(true).weight_bits(weight_bits).activation_bits(activation_bits);
}

model::TemporalFusionTransformer quantized_model(model::TftOptions options, const NamedTensors& weights,
                                                 int64_t weight_bits, int64_t activation_bits, c10::Device device,
                                                 const std::string& source) {
  NamedTensors kept;
  for (const auto& [name, t] : weights) {
    if (!quant::is_observer_state(name)) kept.emplace_back(name, t);
  }
  options.use_qat(true).weight_bits(weight_bits).activation_bits(activation_bits);
  // The initial weights are overwritten; building them draws from a stream of its own.
  auto model = model::build_model(options, 0);
  copy_weights_into(*model, kept, source, /*observers_may_be_missing=*/true);
  model->to(device);
  return model;
}

}  // namespace qtft::artifact
