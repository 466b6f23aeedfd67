#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "qtft/quant/activation_observer.h"
#include "qtft/quant/qat_settings.h"

namespace qtft::model {

// One declared categorical input's embedding: a table of `categories` rows (row 0 the
// unknown level) of `hidden_size`. Its codes arrive as floats, in the batch's layout of
// every input of a kind in one tensor. Under QAT the table is fake-quantized per row, as
// the symbol's is, and the output goes through an observer of its own ("output_quant").
class CategoricalEmbeddingImpl : public torch::nn::Module {
 public:
  CategoricalEmbeddingImpl(int64_t categories, int64_t hidden_size);
  // codes: level indices of any shape, exact integers in [0, categories); returns [..., hidden].
  at::Tensor forward(const at::Tensor& codes);
  // The same with the observer's stored parameters (ActivationFakeQuantImpl::reapply).
  at::Tensor forward_again(const at::Tensor& codes);
  void enable_qat(const quant::QatSettings& settings);
  // The table already holds its quantized values (an int8 file's): used as it is.
  void set_weight_prequantized(bool prequantized) { weight_prequantized_ = prequantized; }

  torch::nn::Embedding embedding{nullptr};
  quant::ActivationFakeQuant output_quant{nullptr};

 private:
  at::Tensor embed(const at::Tensor& codes, bool observe);

  int64_t weight_bits_ = 8;
  bool weight_prequantized_ = false;
};
TORCH_MODULE(CategoricalEmbedding);

}  // namespace qtft::model
