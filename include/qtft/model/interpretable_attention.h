#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "qtft/model/dense.h"
#include "qtft/model/dropout.h"

namespace qtft::model {

struct InterpretableMultiHeadAttentionOptions {
  InterpretableMultiHeadAttentionOptions(int64_t hidden_size, int64_t num_heads)
      : hidden_size_(hidden_size), num_heads_(num_heads) {}
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(int64_t, num_heads);
  TORCH_ARG(double, dropout) = 0.0;
};

struct AttentionOutput {
  at::Tensor output;   // [B, Tq, hidden]
  at::Tensor weights;  // [B, Tq, Tk]  attention averaged over heads (each row sums to 1)
};

// Interpretable multi-head attention (Lim et al., eqs. 13-16). Unlike standard multi-head
// attention, all heads share ONE value projection and their outputs are averaged, not
// concatenated: the model is then exactly "average attention over heads, applied to one set
// of values", so the averaged weights explain the output.
//   q_proj, k_proj: hidden -> heads * d_head (head h uses columns [h*d_head, (h+1)*d_head))
//   v_proj:         hidden -> d_head, shared by all heads
//   out_proj:       d_head -> hidden
class InterpretableMultiHeadAttentionImpl : public torch::nn::Module {
 public:
  explicit InterpretableMultiHeadAttentionImpl(InterpretableMultiHeadAttentionOptions options);

  // query [B, Tq, hidden], key and value [B, Tk, hidden]; mask: undefined, or bool [Tq, Tk]
  // (or [B, Tq, Tk]) where true BLOCKS a position. Every query must keep one open position.
  AttentionOutput forward(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                          const at::Tensor& mask = {});

  const InterpretableMultiHeadAttentionOptions& options() const { return options_; }
  int64_t head_size() const { return options_.hidden_size() / options_.num_heads(); }

  Dense q_proj{nullptr};
  Dense k_proj{nullptr};
  Dense v_proj{nullptr};
  Dense out_proj{nullptr};
  Dropout attention_dropout{nullptr};  // on the attention probabilities
  Dropout output_dropout{nullptr};     // on the projected output

  // Quantization-aware training: the projections (Dense) and the attention probabilities,
  // which an int8 deployment feeds to the value matmul as 8-bit numbers, are fake-quantized.
  void enable_qat(const quant::QatSettings& settings);
  quant::ActivationFakeQuant probabilities_quant{nullptr};

 private:
  InterpretableMultiHeadAttentionOptions options_;
};
TORCH_MODULE(InterpretableMultiHeadAttention);

// The TFT's decoder mask, bool [horizon, encoder_length + horizon] on `device`: decoder step i
// (position encoder_length + i) sees every encoder position and decoder positions <= i;
// true marks the positions it must not see.
at::Tensor decoder_causal_mask(int64_t encoder_length, int64_t horizon, c10::Device device);

}  // namespace qtft::model
