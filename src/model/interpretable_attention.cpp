#include "qtft/model/interpretable_attention.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/softmax.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>

#include "qtft/memory/autocast.h"

namespace qtft::model {

InterpretableMultiHeadAttentionImpl::InterpretableMultiHeadAttentionImpl(InterpretableMultiHeadAttentionOptions options)
    : options_(options) {
  const auto& o = options_;
  TORCH_CHECK(o.hidden_size() > 0 && o.num_heads() > 0 && o.hidden_size() % o.num_heads() == 0,
              "InterpretableMultiHeadAttention: hidden_size must be a positive multiple of num_heads, got hidden_size ",
              o.hidden_size(), " and num_heads ", o.num_heads());
  const int64_t d = head_size();
  q_proj = register_module("q_proj", Dense(o.hidden_size(), o.num_heads() * d));
  k_proj = register_module("k_proj", Dense(o.hidden_size(), o.num_heads() * d));
  v_proj = register_module("v_proj", Dense(o.hidden_size(), d));
  out_proj = register_module("out_proj", Dense(d, o.hidden_size()));
  attention_dropout = register_module("attention_dropout", Dropout(o.dropout()));
  output_dropout = register_module("output_dropout", Dropout(o.dropout()));
}

AttentionOutput InterpretableMultiHeadAttentionImpl::forward(const at::Tensor& query, const at::Tensor& key,
                                                             const at::Tensor& value, const at::Tensor& mask) {
  TORCH_CHECK(query.dim() == 3 && key.dim() == 3 && value.dim() == 3,
              "InterpretableMultiHeadAttention: expected query, key and value of rank 3 [B, T, hidden], got ",
              query.sizes(), ", ", key.sizes(), ", ", value.sizes());
  TORCH_CHECK(key.size(0) == query.size(0) && value.size(0) == query.size(0) && key.size(1) == value.size(1),
              "InterpretableMultiHeadAttention: batch sizes and key/value lengths must agree, got query ",
              query.sizes(), ", key ", key.sizes(), ", value ", value.sizes());
  const int64_t b = query.size(0), tq = query.size(1), tk = key.size(1);
  const int64_t heads = options_.num_heads(), d = head_size();

  // [B, T, heads * d] -> [B, heads, T, d]
  const at::Tensor q = q_proj(query).view({b, tq, heads, d}).transpose(1, 2);
  const at::Tensor k = k_proj(key).view({b, tk, heads, d}).transpose(1, 2);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));  // [B, heads, Tq, Tk]
  if (mask.defined()) {
    TORCH_CHECK(mask.scalar_type() == at::kBool && (mask.dim() == 2 || mask.dim() == 3) && mask.size(-2) == tq &&
                    mask.size(-1) == tk,
                "InterpretableMultiHeadAttention: expected a bool mask [", tq, ", ", tk, "] or [B, ", tq, ", ", tk,
                "], got ", mask.scalar_type(), " ", mask.sizes());
    // -inf gives masked positions exactly zero probability (a large negative number would not).
    scores = scores.masked_fill(mask.dim() == 2 ? mask : mask.unsqueeze(1), -std::numeric_limits<double>::infinity());
  }
  // Softmax in FP32 under --precision bf16: bf16 scores would round the weights of long windows away.
  const at::Tensor probabilities = at::softmax(memory::full_precision(scores), -1);

  // Heads share the values, so the mean of the heads' outputs, mean_h(A_h V), equals
  // (mean_h A_h) V: one matmul with V instead of one per head.
  const at::Tensor used = probabilities_quant.is_empty() ? probabilities : probabilities_quant(probabilities);
  const at::Tensor mixed = attention_dropout(used).mean(1);        // [B, Tq, Tk]
  const at::Tensor heads_mean = at::matmul(mixed, v_proj(value));  // [B, Tq, d]
  return {output_dropout(out_proj(heads_mean)), probabilities.mean(1)};
}

void InterpretableMultiHeadAttentionImpl::enable_qat(const quant::QatSettings& settings) {
  for (auto* dense : {&q_proj, &k_proj, &v_proj, &out_proj}) (*dense)->enable_qat(settings);
  if (probabilities_quant.is_empty()) {
    probabilities_quant =
        register_module("probabilities_quant", quant::ActivationFakeQuant(settings.observer_options()));
  }
}

at::Tensor decoder_causal_mask(int64_t encoder_length, int64_t horizon, c10::Device device) {
  TORCH_CHECK(encoder_length >= 0 && horizon > 0,
              "decoder_causal_mask: expected encoder_length >= 0 and horizon > 0, got ", encoder_length, " and ",
              horizon);
  const auto long_options = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor query_position = at::arange(encoder_length, encoder_length + horizon, long_options).unsqueeze(1);
  const at::Tensor key_position = at::arange(encoder_length + horizon, long_options).unsqueeze(0);
  return key_position > query_position;
}

}  // namespace qtft::model
