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

LoadedModel load_model(const std::filesystem::path& path, c10::Device device) {
  return model_from_file(load_model_file(path), path.string(), device);
}

LoadedModel model_from_file(ModelFile file, const std::string& source, c10::Device device) {
  // The initial weights are overwritten; building them draws from a stream of its own.
  auto model = build_model(file.options, 0);
  copy_weights_into(*model, file.weights, source);
  if (file.int8_weights) model->set_weights_prequantized(true);
  model->to(device);
  return {std::move(file), std::move(model)};
}

void convert_to_qat(LoadedModel& loaded, int64_t weight_bits, int64_t activation_bits, c10::Device device) {
  auto& options = loaded.file.options;
  if (loaded.file.int8_weights) {
    throw Error("an int8 export is quantized already; quantize the model it was exported from");
  }
  if (options.use_qat() && options.weight_bits() == weight_bits && options.activation_bits() == activation_bits) return;
  // A QAT model at other bit widths keeps its weights but starts with fresh observers.
  NamedTensors weights;
  for (const auto& [name, t] : named_weights(*loaded.model)) {
    if (!quant::is_observer_state(name)) weights.emplace_back(name, t);
  }
  options.use_qat(true).weight_bits(weight_bits).activation_bits(activation_bits);
  auto model = build_model(options, 0);
  copy_weights_into(*model, weights, "converting to QAT", /*observers_may_be_missing=*/true);
  model->to(device);
  loaded.model = model;
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
