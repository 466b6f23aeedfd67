#include "qtft/model/categorical_embedding.h"

#include <ATen/ops/embedding.h>
#include <c10/util/Exception.h>

#include "qtft/quant/detail/weight_fake_quant.h"

namespace qtft::model {

CategoricalEmbeddingImpl::CategoricalEmbeddingImpl(int64_t categories, int64_t hidden_size) {
  embedding = register_module("embedding", torch::nn::Embedding(categories, hidden_size));
}

at::Tensor CategoricalEmbeddingImpl::forward(const at::Tensor& codes) { return embed(codes, true); }

at::Tensor CategoricalEmbeddingImpl::forward_again(const at::Tensor& codes) { return embed(codes, false); }

at::Tensor CategoricalEmbeddingImpl::embed(const at::Tensor& codes, bool observe) {
  const at::Tensor index = codes.to(at::kLong);
  if (codes.is_cpu() && codes.numel() > 0) {
    // As for the symbol: on the CPU a clear message costs nothing, on CUDA it would sync.
    const int64_t rows = embedding->weight.size(0);
    const int64_t lo = index.min().item<int64_t>(), hi = index.max().item<int64_t>();
    TORCH_CHECK(lo >= 0 && hi < rows, "CategoricalEmbedding: level indices must be in [0, ", rows, "), got values in [",
                lo, ", ", hi, "]");
  }
  if (output_quant.is_empty()) return embedding(index);
  const at::Tensor& table = embedding->weight;
  at::Tensor embedded =
      at::embedding(weight_prequantized_ ? table : quant::fake_quantize_weight(table, weight_bits_), index);
  return observe ? output_quant(std::move(embedded)) : output_quant->reapply(std::move(embedded));
}

void CategoricalEmbeddingImpl::enable_qat(const quant::QatSettings& settings) {
  weight_bits_ = settings.weight_bits;
  output_quant = register_module("output_quant", quant::ActivationFakeQuant(settings.observer_options()));
}

}  // namespace qtft::model
