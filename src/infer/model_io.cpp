#include "qtft/infer/model_io.h"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "qtft/common/error.h"
#include "qtft/memory/rng_state.h"
#include "qtft/quant/observers.h"

namespace qtft::infer {

c10::Device resolve_device(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (name == "cuda" || name == "auto") {
    if (torch::cuda::is_available()) return c10::Device(c10::kCUDA, 0);
    if (name == "auto") return c10::Device(c10::kCPU);
    throw UsageError("--device cuda: no usable CUDA GPU on this machine (use --device cpu or auto)");
  }
  throw UsageError("--device must be cpu, cuda or auto, got '" + name + "'");
}

model::TemporalFusionTransformer build_model(const model::TftOptions& options, uint64_t seed) {
  options.validate();
  model::TemporalFusionTransformer model{nullptr};
  memory::CpuRandomStream(seed).run([&] { model = model::TemporalFusionTransformer(options); });
  return model;
}

Int8Kernels parse_int8_kernels(const std::string& name, const std::string& flag) {
  if (name == "integer") return Int8Kernels::integer;
  if (name == "dequantized") return Int8Kernels::dequantized;
  throw UsageError(flag + " must be integer or dequantized, got '" + name + "'");
}

LoadedModel load_model(const std::filesystem::path& path, c10::Device device, Int8Kernels int8_kernels) {
  return model_from_file(load_model_file(path), path.string(), device, int8_kernels);
}

LoadedModel model_from_file(ModelFile file, const std::string& source, c10::Device device, Int8Kernels int8_kernels) {
  // The initial weights are overwritten; building them draws from a stream of its own.
  auto model = build_model(file.options, 0);
  copy_weights_into(*model, file.weights, source);
  model::TemporalFusionTransformerImpl::IntegerProductSummary integer_products;
  std::string float_products_reason;
  if (file.int8_weights) {
    model->set_weights_prequantized(true);
    const std::string backend = quant::Int8Linear::unavailable_reason();
    if (int8_kernels == Int8Kernels::dequantized) {
      float_products_reason = "dequantized kernels were asked for";
    } else if (!device.is_cpu()) {
      float_products_reason = "integer products run on the CPU only";
    } else if (!backend.empty()) {
      float_products_reason = backend;
    } else {
      integer_products = model->use_integer_products(file.quantized_weights);
    }
  }
  model->to(device);
  return {std::move(file), std::move(model), integer_products, std::move(float_products_reason)};
}

std::string describe_int8_kernels(const LoadedModel& loaded) {
  if (!loaded.file.int8_weights) return {};
  if (!loaded.float_products_reason.empty()) return "int8 products in float: " + loaded.float_products_reason;
  const auto& s = loaded.integer_products;
  std::string line = "integer products: " + std::to_string(s.products.in_use) + " of " + std::to_string(s.dense_layers) +
                     " Dense layers";
  if (s.products.in_use < s.products.eligible) {
    line += " (" + std::to_string(s.products.eligible - s.products.in_use) + " more would saturate this CPU's kernel at " +
            std::to_string(loaded.file.options.activation_bits()) + "-bit activations; they stay in float)";
  }
  return line;
}

void convert_to_qat(LoadedModel& loaded, int64_t weight_bits, int64_t activation_bits, c10::Device device) {
  auto& options = loaded.file.options;
  if (loaded.file.int8_weights) {
    throw Error("an int8 export is quantized already; quantize the model it was exported from");
  }
  if (options.use_qat() && options.weight_bits() == weight_bits && options.activation_bits() == activation_bits) return;
  // A QAT model at other bit widths keeps its weights but starts with fresh observers.
  loaded.model = quantized_model(options, named_weights(*loaded.model), weight_bits, activation_bits, device,
                                 "converting to QAT");
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
  auto model = build_model(options, 0);
  copy_weights_into(*model, kept, source, /*observers_may_be_missing=*/true);
  model->to(device);
  return model;
}

model::TftOptions model_options_for(const data::Dataset& dataset) {
  return model::TftOptions(static_cast<int64_t>(dataset.num_observed()), static_cast<int64_t>(dataset.num_known()),
                           static_cast<int64_t>(dataset.spec().symbols.size()), dataset.options().encoder_length,
                           dataset.options().horizon);
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace qtft::infer
