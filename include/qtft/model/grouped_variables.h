#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "qtft/model/dense.h"
#include "qtft/model/gated_residual_network.h"

namespace qtft::model {

// The per-variable layers of a selection network run as one batched network over a
// [variables, rows, width] layout: one batched product (baddbmm) per layer for all
// variables and one pass per elementwise step, where each variable's modules ran their own
// small operators (220 inputs: 220 times each, forward and backward). The per-variable
// modules keep the parameters, their names and their observers; these functions stack
// their weights per call. Each variable's observer sees its own slice and each variable's
// dropout draws its own mask in variable order, so a forward is the per-variable modules'
// forward to float rounding (mostly bitwise: the same matrix products, batched; ATen's
// batched product takes a kernel of its own for small matrices).

// layers[i]'s product on x[i] ([n, rows, in] -> [n, rows, out]), through layers[i]'s
// observer under QAT.
at::Tensor grouped_dense(const std::vector<DenseImpl*>& layers, const at::Tensor& x);

// Each real input through its own Dense(1 -> width): raw [..., n] -> [..., n, width]. With
// `observe` false the observers reapply their stored parameters (a second use of inputs the
// step has observed already; ActivationFakeQuantImpl::reapply).
at::Tensor grouped_real_embedding(const std::vector<DenseImpl*>& layers, const at::Tensor& raw, bool observe = true);

// grns[i] on x[i] without its layer norm, x [n, rows, width] of GRNs width -> width with no
// context: x + GLU(dropout(fc2(ELU(fc1(x))))). The caller normalizes each variable.
at::Tensor grouped_grn_residual(const std::vector<GatedResidualNetworkImpl*>& grns, const at::Tensor& x);

}  // namespace qtft::model
