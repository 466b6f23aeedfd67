#pragma once

#include <ATen/core/Tensor.h>

namespace qtft::model::detail {

// residual + sigmoid(gate_logits) * value: the end of every gated residual network and
// gated skip connection (GLU, then the residual sum). Unfused it is four passes over the
// activations forward (sigmoid, product, under bf16 a cast, sum) and five backward; here
// it is two forward (ATen's sigmoid, whose output the backward keeps, then product and sum
// in one loop) and one backward.
//
// The arithmetic is the unfused expression's, operation for operation, so the results are
// its bits in both precisions (tested): the product rounds to the gate's type (bf16 under
// autocast, as at::mul rounds it) before the sum, which is computed in FP32 when either
// side is FP32; the backward rounds the incoming gradient to the gate's type, as autograd
// does for a bf16 input of an FP32 sum, and forms sigmoid's gradient as
// at::sigmoid_backward does, g * (1 - s) * s. The file is compiled without contracting a
// product and a sum into one fused multiply-add, which would round once instead of twice.
//
// Taken on CPU for gate and value of one type, float or bf16, and a float residual of the
// same shape (under bf16 the residual is widened first: layer norms take FP32); otherwise
// the unfused expression, which is also the tests' reference.
at::Tensor gated_residual_sum(const at::Tensor& residual, const at::Tensor& gate_logits, const at::Tensor& value);

// The unfused expression, for the tests and for what the fused one does not take.
at::Tensor unfused_gated_residual_sum(const at::Tensor& residual, const at::Tensor& gate_logits,
                                      const at::Tensor& value);

}  // namespace qtft::model::detail
