#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "qtft/memory/block_checkpointing.h"
#include "qtft/model/dense.h"
#include "qtft/model/gated_residual_network.h"

namespace qtft::model {

struct VariableSelectionNetworkOptions {
  VariableSelectionNetworkOptions(int64_t num_inputs, int64_t hidden_size)
      : num_inputs_(num_inputs), hidden_size_(hidden_size) {}
  TORCH_ARG(int64_t, num_inputs);
  TORCH_ARG(int64_t, hidden_size);
  // Width of each embedded input and of its GRN; 0 means hidden_size. When narrower, the
  // selected sum is projected to hidden_size (output_projection).
  TORCH_ARG(int64_t, variable_size) = 0;
  TORCH_ARG(double, dropout) = 0.0;
  // Width of the static context that steers the selection; 0 means none (static selection).
  TORCH_ARG(int64_t, context_size) = 0;

 public:  // TORCH_ARG leaves the access at private
  int64_t variable_width() const { return variable_size_ > 0 ? variable_size_ : hidden_size_; }
};

// A selection network's inputs as block inputs and what embeds them: embed(raw, first,
// count) gives variables [first, first + count) as [..., count, width]. The embedding runs
// again for every block that needs it, so that no block keeps the embedded inputs: they are
// recomputed from the raw columns, which are small. A QAT embedding here must reapply its
// observers' parameters (the model observes the embeddings once per step beforehand).
struct SelectionInputs {
  std::vector<at::Tensor> raw;
  int64_t rows = 0;  // the embedded inputs' leading dimensions, multiplied (batch x time)
  std::function<at::Tensor(const std::vector<at::Tensor>& raw, int64_t first, int64_t count)> embed;
};

struct VariableSelectionOutput {
  at::Tensor output;   // [..., hidden]      selection-weighted sum of the processed inputs
  at::Tensor weights;  // [..., num_inputs]  softmax selection weights (sum to 1)
};

// Variable selection (Lim et al., eqs. 6-8): weights = softmax(flattened_grn(concat of the
// embedded inputs, c)), each input passes through its own GRN (variable_grns.<i>), and the
// output is their weighted sum (projected to the hidden size when the inputs are narrower).
// The weights are the model's per-input importance.
//
// The variables' GRNs run as one batched network (model/grouped_variables.h); the
// per-variable modules hold the parameters and remain the reference (forward_per_variable).
//
// With a single input the softmax is the constant 1 and a flattened GRN would never learn
// (its gradient is exactly zero), so none is built and the weight is returned as ones.
class VariableSelectionNetworkImpl : public torch::nn::Module {
 public:
  explicit VariableSelectionNetworkImpl(VariableSelectionNetworkOptions options);

  // inputs: [..., num_inputs, width], e.g. [B, T, n, width] over time or [B, n, width] for
  // static inputs. context: as for GatedResidualNetwork::forward (e.g. [B, C]).
  VariableSelectionOutput forward(const at::Tensor& inputs, const at::Tensor& context = {});

  // The same from `inputs`, as blocks that `blocks` checkpoints or not (either way the
  // result is bitwise the same): the selector ("selection_weights") embeds every input a
  // chunk at a time and sums its first products' chunks (GRN::forward_concatenated), and
  // the variables' GRNs run in chunks of chunk_size() variables ("selected_variables"; one
  // block, "variable_selection", for a single input), each embedding its own variables and
  // adding its weighted outputs to the sum of the chunks before it in variable order, so
  // that the sum is bitwise the unchunked one and a recompute holds one chunk's activations.
  VariableSelectionOutput forward_blocks(const SelectionInputs& inputs, const at::Tensor& context,
                                         const memory::BlockCheckpointing& blocks);
  // Variables per "selected_variables" block over `rows` rows (batch x time): at most about
  // the square root of the inputs, and fewer when a chunk's tensors would pass kChunkFloats.
  // The chunks change no bit of the result, only memory and time.
  int64_t chunk_size(int64_t rows) const;
  static constexpr int64_t kChunkFloats = int64_t{1} << 20;

  // The reference: each variable's GRN on its own, the selector on the concatenation. The
  // same forward and gradients as the grouped one to float rounding. Int8 inference takes
  // this path, as its integer products are per layer.
  VariableSelectionOutput forward_per_variable(const at::Tensor& inputs, const at::Tensor& context = {});

  const VariableSelectionNetworkOptions& options() const { return options_; }

  GatedResidualNetwork flattened_grn{nullptr};  // registered only when num_inputs > 1
  torch::nn::ModuleList variable_grns{nullptr};
  Dense output_projection{nullptr};  // registered only when variable_size differs from hidden_size

 private:
  void check_inputs(const at::Tensor& inputs) const;
  at::Tensor selection_weights(const std::vector<at::Tensor>& chunks, const at::Tensor& context);
  // Variables [first, first + count) (inputs [..., count, width]) through their GRNs as one
  // network, each weighted and added to `sum` (undefined before the first) in variable order.
  at::Tensor add_selected_variables(const at::Tensor& inputs, const at::Tensor& weights, at::Tensor sum, int64_t first);
  at::Tensor project(at::Tensor selected);
  bool integer_products_in_use() const;

  VariableSelectionNetworkOptions options_;
};
TORCH_MODULE(VariableSelectionNetwork);

}  // namespace qtft::model
