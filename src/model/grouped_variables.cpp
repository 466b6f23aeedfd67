#include "qtft/model/grouped_variables.h"

#include <ATen/ops/baddbmm.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/stack.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "qtft/model/detail/gated_sum.h"
#include "qtft/quant/grouped_observer.h"

namespace qtft::model {
namespace {

at::Tensor stacked_weights(const std::vector<DenseImpl*>& layers) {
  std::vector<at::Tensor> weights;
  weights.reserve(layers.size());
  for (const DenseImpl* layer : layers) weights.push_back(layer->weight_in_use());
  return at::stack(weights);
}

at::Tensor stacked_biases(const std::vector<DenseImpl*>& layers) {
  std::vector<at::Tensor> biases;
  biases.reserve(layers.size());
  for (const DenseImpl* layer : layers) {
    TORCH_CHECK(layer->linear->bias.defined(), "grouped layers: every layer needs a bias");
    biases.push_back(layer->linear->bias);
  }
  return at::stack(biases);
}

// Variable i's slice (along `dim`) through layers[i]'s observer; with `observe` false the
// observers reapply their stored parameters.
at::Tensor observe_each(const std::vector<DenseImpl*>& layers, at::Tensor x, int64_t dim, bool observe = true) {
  if (!layers.front()->qat_enabled()) return x;
  std::vector<quant::ActivationFakeQuantImpl*> observers;
  observers.reserve(layers.size());
  for (DenseImpl* layer : layers) observers.push_back(layer->output_quant.get());
  return quant::observe_slices(observers, std::move(x), dim, observe);
}

}  // namespace

at::Tensor grouped_dense(const std::vector<DenseImpl*>& layers, const at::Tensor& x) {
  TORCH_CHECK(!layers.empty() && x.dim() == 3 && x.size(0) == static_cast<int64_t>(layers.size()) &&
                  x.size(2) == layers.front()->options().in_features(),
              "grouped layers: expected input [", layers.size(), ", rows, ",
              layers.empty() ? 0 : layers.front()->options().in_features(), "], got ", x.sizes());
  at::Tensor product = at::baddbmm(stacked_biases(layers).unsqueeze(1), x, stacked_weights(layers).transpose(1, 2));
  return observe_each(layers, std::move(product), 0);
}

at::Tensor grouped_real_embedding(const std::vector<DenseImpl*>& layers, const at::Tensor& raw, bool observe) {
  TORCH_CHECK(!layers.empty() && raw.dim() >= 1 && raw.size(-1) == static_cast<int64_t>(layers.size()) &&
                  layers.front()->options().in_features() == 1,
              "grouped embedding: expected ", layers.size(), " raw inputs in the last dimension, got ", raw.sizes());
  // Dense(1 -> width) is x * weight column + bias, a product then a sum as at::linear
  // rounds them for one column of the input (a fused multiply-add would round once).
  at::Tensor embedded = raw.unsqueeze(-1) * stacked_weights(layers).squeeze(-1) + stacked_biases(layers);
  return observe_each(layers, std::move(embedded), -2, observe);
}

at::Tensor grouped_grn_residual(const std::vector<GatedResidualNetworkImpl*>& grns, const at::Tensor& x) {
  std::vector<DenseImpl*> fc1, fc2, value, gate;
  for (GatedResidualNetworkImpl* grn : grns) {
    TORCH_CHECK(!grn->context_projection && !grn->skip_projection,
                "grouped GRNs: expected GRNs without context or skip projection");
    fc1.push_back(grn->fc1.get());
    fc2.push_back(grn->fc2.get());
    value.push_back(grn->gate->fc.get());
    gate.push_back(grn->gate->gate_fc.get());
  }
  at::Tensor hidden = grouped_dense(fc2, at::elu(grouped_dense(fc1, x)));
  if (grns.front()->dropout->is_training() && grns.front()->dropout->p() > 0.0) {
    // Each variable's dropout draws its own mask, in variable order, as its GRN would.
    std::vector<at::Tensor> dropped = hidden.unbind(0);
    for (size_t i = 0; i < grns.size(); ++i) dropped[i] = grns[i]->dropout->forward(dropped[i]);
    hidden = at::stack(dropped);
  }
  // The sum takes the gated branch's contiguous layout, not x's strided one (x may be a
  // transposed view of the [rows, variables, width] inputs).
  const at::Tensor gate_logits = grouped_dense(gate, hidden);
  return detail::gated_residual_sum(x, gate_logits, grouped_dense(value, hidden));
}

}  // namespace qtft::model
