#pragma once

#include <ATen/core/Tensor.h>

namespace qtft::model::detail {

// LayerNorm(skip + sigmoid(gate) * linear) over the last dimension, with the LayerNorm's
// weight and bias and epsilon: the end of every GRN and GateAddNorm (the GLU, the residual
// add and the norm), after its two products.
//
// Why: as ATen ops it is four passes forward (sigmoid, mul, add, layer_norm) and five
// backward, each its own trip through memory and the dispatcher; they were a fifth of the
// non-product time of a paper-sized step (docs/PERFORMANCE.md). On the CPU, in float or
// double, when the three inputs have one shape, it is here the sigmoid and one pass per row
// forward, and one pass per row backward, which the compiler vectorizes. The results are not
// bitwise ATen's (the sums run in another order); they are tested against it to a
// tolerance. They are bitwise the same with and without gradient, on any number of threads,
// so that a checkpoint's recompute reproduces them. Elsewhere it is the ATen ops.
at::Tensor gated_add_norm(const at::Tensor& linear, const at::Tensor& gate, const at::Tensor& skip,
                          const at::Tensor& weight, const at::Tensor& bias, double eps);

}  // namespace qtft::model::detail
