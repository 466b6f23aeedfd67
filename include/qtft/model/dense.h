#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "qtft/quant/activation_observer.h"
#include "qtft/quant/int8_linear.h"
#include "qtft/quant/qat_settings.h"

namespace qtft::model {

struct DenseOptions {
  DenseOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  TORCH_ARG(int64_t, in_features);
  TORCH_ARG(int64_t, out_features);
  TORCH_ARG(bool, bias) = true;
};

// Every linear layer of the TFT is a Dense, so that quantization-aware training can wrap
// weights and activations in exactly one place. Its parameters live in the submodule
// "linear" (paths such as "encoder_vsn.flattened_grn.fc1.linear.weight").
class DenseImpl : public torch::nn::Module {
 public:
  explicit DenseImpl(DenseOptions options);
  DenseImpl(int64_t in_features, int64_t out_features) : DenseImpl(DenseOptions(in_features, out_features)) {}

  at::Tensor forward(const at::Tensor& x);
  // forward(at::cat(parts, -1)) without building the concatenation: one product per part
  // with its columns of the (fake-quantized) weight, summed, then the output observer as
  // usual. The selection networks' selector takes every embedded input at once, and the
  // concatenation and its gradient were the largest activations of a checkpointed step.
  at::Tensor forward_concatenated(const std::vector<at::Tensor>& parts);

  const DenseOptions& options() const { return options_; }

  // From now on the weight is fake-quantized per output channel and the output goes through
  // an observer registered as "output_quant" (so it is saved with the model).
  void enable_qat(const quant::QatSettings& settings);
  bool qat_enabled() const { return !output_quant.is_empty(); }
  // The weight already holds what QAT's fake quantization makes of it (an int8 file's
  // integers times their scales), so products use it as it is instead of quantizing it
  // again on every call. Quantizing those values again would not even give them back
  // bitwise: the scale would be recomputed from them. For inference only.
  void set_weight_prequantized(bool prequantized) { weight_prequantized_ = prequantized; }

  // Inference from an int8 file: from now on, outside training and without gradient, the
  // product runs in integers (quant::Int8Linear) on `weight` (the integers behind the
  // prequantized weight), with the input quantized by `input`, the observer whose output
  // this layer takes, so that the quantization is exactly the one QAT applied. Returns
  // false, and keeps the float product, when the kernel could saturate on this weight at
  // the input's bit width (quant::Int8Linear::saturation_free).
  bool use_integer_product(const quant::QuantizedWeight& weight, const quant::ActivationFakeQuantImpl& input);
  bool integer_product_in_use() const { return integer_product_ != nullptr; }

  // The weight the product uses: fake-quantized per output channel under QAT.
  at::Tensor weight_in_use() const;

  torch::nn::Linear linear{nullptr};
  quant::ActivationFakeQuant output_quant{nullptr};

 private:
  DenseOptions options_;
  int64_t weight_bits_ = 8;
  bool weight_prequantized_ = false;
  std::shared_ptr<const quant::Int8Linear> integer_product_;
};
TORCH_MODULE(Dense);

// How the layers of a model loaded from an int8 file find a Dense layer's integers.
using IntegerWeights = std::function<const quant::QuantizedWeight&(const DenseImpl&)>;

// Products that could run in integers because their input is exactly an observer's output
// (eligible), and those that do (the rest would saturate the kernel; see Int8Linear).
struct IntegerProductCount {
  int64_t eligible = 0;
  int64_t in_use = 0;
  IntegerProductCount& operator+=(const IntegerProductCount& other) {
    eligible += other.eligible;
    in_use += other.in_use;
    return *this;
  }
};

// dense.use_integer_product(weights(dense), input), counted.
IntegerProductCount use_integer_product(DenseImpl& dense, const IntegerWeights& weights,
                                        const quant::ActivationFakeQuantImpl& input);

}  // namespace qtft::model
