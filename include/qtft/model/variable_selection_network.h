#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "qtft/memory/block_checkpointing.h"
#include "qtft/model/gated_residual_network.h"

namespace qtft::model {

struct VariableSelectionNetworkOptions {
  VariableSelectionNetworkOptions(int64_t num_inputs, int64_t hidden_size)
      : num_inputs_(num_inputs), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, num_inputs);
  TORCH_ARG(int64_t, hidden_size);
  TORCH_ARG(double, dropout) = 0.0;
  // Width of the static context that steers the selection; 0 means none (static selection).
  TORCH_ARG(int64_t, context_size) = 0;
};

struct VariableSelectionOutput {
  at::Tensor output;   // [..., hidden]      selection-weighted sum of the processed inputs
  at::Tensor weights;  // [..., num_inputs]  softmax selection weights (sum to 1)
};

// Variable selection (Lim et al., eqs. 6-8): weights = softmax(flattened_grn(concat of the
// embedded inputs, c)), each input passes through its own GRN (variable_grns.<i>), and the
// output is their weighted sum. The weights are the model's per-input importance.
//
// With a single input the softmax is the constant 1 and a flattened GRN would never learn
// (its gradient is exactly zero), so none is built and the weight is returned as ones.
class VariableSelectionNetworkImpl : public torch::nn::Module {
 public:
  explicit VariableSelectionNetworkImpl(VariableSelectionNetworkOptions options);

  // inputs: [..., num_inputs, hidden], e.g. [B, T, n, hidden] over time or [B, n, hidden]
  // for static inputs. context: as for GatedResidualNetwork::forward (e.g. [B, C]).
  VariableSelectionOutput forward(const at::Tensor& inputs, const at::Tensor& context = {});

  // The same on the embedded inputs one by one (each [..., hidden]), as blocks: the
  // selector ("selection_weights") and each variable's GRN ("selected_variable", or
  // "variable_selection" for a single input) run through `blocks`, which checkpoints them
  // or not. Either way the result is bitwise the same.
  VariableSelectionOutput forward_variables(const std::vector<at::Tensor>& inputs, const at::Tensor& context,
                                            const memory::BlockCheckpointing& blocks);

  const VariableSelectionNetworkOptions& options() const { return options_; }

  GatedResidualNetwork flattened_grn{nullptr};  // registered only when num_inputs > 1
  torch::nn::ModuleList variable_grns{nullptr};

 private:
  VariableSelectionNetworkOptions options_;
};
TORCH_MODULE(VariableSelectionNetwork);

}  // namespace qtft::model
