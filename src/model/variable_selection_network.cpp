#include "qtft/model/variable_selection_network.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "qtft/memory/autocast.h"
#include "qtft/model/grouped_variables.h"

namespace qtft::model {

VariableSelectionNetworkImpl::VariableSelectionNetworkImpl(VariableSelectionNetworkOptions options)
    : options_(options) {
  const auto& o = options_;
  const int64_t width = o.variable_width();
  TORCH_CHECK(o.num_inputs() > 0 && o.hidden_size() > 0 && width > 0,
              "VariableSelectionNetwork: expected positive num_inputs, hidden_size and variable_size, got ",
              o.num_inputs(), ", ", o.hidden_size(), " and ", width);
  if (o.num_inputs() > 1) {
    flattened_grn = register_module(
        "flattened_grn",
        GatedResidualNetwork(GatedResidualNetworkOptions(o.num_inputs() * width, o.hidden_size(), o.num_inputs())
                                 .dropout(o.dropout())
                                 .context_size(o.context_size())));
  }
  variable_grns = register_module("variable_grns", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.num_inputs(); ++i) {
    variable_grns->push_back(
        GatedResidualNetwork(GatedResidualNetworkOptions(width, width, width).dropout(o.dropout())));
  }
  if (width != o.hidden_size()) output_projection = register_module("output_projection", Dense(width, o.hidden_size()));
}

void VariableSelectionNetworkImpl::check_inputs(const at::Tensor& inputs) const {
  const auto& o = options_;
  TORCH_CHECK(inputs.dim() >= 2 && inputs.size(-2) == o.num_inputs() && inputs.size(-1) == o.variable_width(),
              "VariableSelectionNetwork: expected inputs [..., ", o.num_inputs(), ", ", o.variable_width(),
              "], got shape ", inputs.sizes());
}

VariableSelectionOutput VariableSelectionNetworkImpl::forward(const at::Tensor& inputs, const at::Tensor& context) {
  check_inputs(inputs);
  // Inputs already embedded: a chunk's are a slice of them.
  const int64_t rows = inputs.numel() / (options_.num_inputs() * options_.variable_width());
  const SelectionInputs embedded{{inputs}, rows, [](const std::vector<at::Tensor>& raw, int64_t first, int64_t count) {
                                   return raw[0].narrow(-2, first, count);
                                 }};
  return forward_blocks(embedded, context, memory::BlockCheckpointing());
}

int64_t VariableSelectionNetworkImpl::chunk_size(int64_t rows) const {
  const auto n = options_.num_inputs();
  const auto square_root = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  // A chunk's [variables, rows, width] activations stay under kChunkFloats each: the CPU
  // allocator serves such blocks again from its heap, where larger ones are mapped and
  // faulted in afresh for every operator (the grouped step took twice the per-variable
  // one's time at 220 inputs of width 160 with whole-selector tensors).
  const int64_t fitting = kChunkFloats / std::max<int64_t>(1, rows * options_.variable_width());
  return std::clamp<int64_t>(fitting, 1, square_root);
}

VariableSelectionOutput VariableSelectionNetworkImpl::forward_blocks(const SelectionInputs& inputs,
                                                                     const at::Tensor& context,
                                                                     const memory::BlockCheckpointing& blocks) {
  using Tensors = std::vector<at::Tensor>;
  const int64_t n = options_.num_inputs();
  const auto raw_count = static_cast<std::ptrdiff_t>(inputs.raw.size());
  const auto embed = inputs.embed;
  auto raw_of = [raw_count](const Tensors& in) { return Tensors(in.begin(), in.begin() + raw_count); };
  if (integer_products_in_use()) return forward_per_variable(embed(inputs.raw, 0, n), context);
  if (!flattened_grn) {
    // One input: the context could only steer a choice there is not, so it is not used.
    const at::Tensor processed = blocks.run_one("variable_selection", inputs.raw, [this, embed](const Tensors& in) {
      return Tensors{project(variable_grns->at<GatedResidualNetworkImpl>(0).forward(embed(in, 0, 1).select(-2, 0)))};
    });
    auto weight_sizes = processed.sizes().vec();
    weight_sizes.back() = 1;  // [..., 1]
    return {processed, at::ones(weight_sizes, processed.options())};
  }
  const int64_t chunk = chunk_size(inputs.rows);
  Tensors selector_inputs = inputs.raw;
  if (context.defined()) selector_inputs.push_back(context);
  const at::Tensor weights = blocks.run_one("selection_weights", selector_inputs, [=, this](const Tensors& in) {
    const at::Tensor c = static_cast<std::ptrdiff_t>(in.size()) > raw_count ? in.back() : at::Tensor();
    Tensors chunks;
    for (int64_t first = 0; first < n; first += chunk) {
      chunks.push_back(embed(raw_of(in), first, std::min(chunk, n - first)).flatten(-2));
    }
    return Tensors{selection_weights(chunks, c)};
  });
  at::Tensor sum;
  for (int64_t first = 0; first < n; first += chunk) {
    const int64_t count = std::min(chunk, n - first);
    Tensors chunk_inputs = inputs.raw;
    chunk_inputs.push_back(weights);
    if (sum.defined()) chunk_inputs.push_back(sum);
    sum = blocks.run_one("selected_variables", chunk_inputs, [=, this](const Tensors& in) {
      const at::Tensor previous = static_cast<std::ptrdiff_t>(in.size()) > raw_count + 1 ? in.back() : at::Tensor();
      at::Tensor added = add_selected_variables(embed(raw_of(in), first, count), in[raw_count], previous, first);
      return Tensors{first + count == n ? project(std::move(added)) : added};
    });
  }
  return {sum, weights};
}

at::Tensor VariableSelectionNetworkImpl::selection_weights(const std::vector<at::Tensor>& chunks,
                                                           const at::Tensor& context) {
  // Each chunk [..., count * width] is a piece of the concatenation; with gradient the
  // selector sums a product per piece instead of building it (a [rows, n * width] tensor
  // is 757 MB at 220 inputs of width 160 and batch 32), without it takes one product.
  // Softmax in FP32 under --precision bf16, as every normalization.
  return at::softmax(memory::full_precision(flattened_grn->forward_concatenated(chunks, context)), -1);
}

at::Tensor VariableSelectionNetworkImpl::add_selected_variables(const at::Tensor& inputs, const at::Tensor& weights,
                                                                at::Tensor sum, int64_t first) {
  const int64_t n = options_.num_inputs(), count = inputs.size(-2), width = options_.variable_width();
  std::vector<GatedResidualNetworkImpl*> grns;
  for (int64_t i = first; i < first + count; ++i)
    grns.push_back(variable_grns->at<GatedResidualNetworkImpl>(static_cast<size_t>(i)).as<GatedResidualNetworkImpl>());
  const at::Tensor rows = inputs.reshape({-1, count, width});
  // Each variable's slice, and each variable's weight, by unbind and split, whose backward
  // passes assemble the gradients once (a select or narrow per variable would fill a zeroed
  // gradient of the whole tensor per variable: at 220 inputs of width 160, minutes a step).
  const std::vector<at::Tensor> residual = grouped_grn_residual(grns, rows.transpose(0, 1)).unbind(0);
  const std::vector<at::Tensor> row_weights = weights.reshape({-1, n}).narrow(-1, first, count).split(1, -1);
  // Each variable's layer norm and weight in variable order, as the per-variable sum adds them.
  std::vector<int64_t> sizes = inputs.sizes().vec();
  sizes.pop_back();
  sizes.back() = width;  // [..., width]
  if (sum.defined()) sum = sum.reshape({-1, width});
  for (int64_t i = 0; i < count; ++i) {
    const auto v = static_cast<size_t>(i);
    const at::Tensor weighted = grns[v]->layer_norm(memory::full_precision(residual[v])) * row_weights[v];
    sum = sum.defined() ? sum + weighted : weighted;
  }
  return sum.reshape(sizes);
}

at::Tensor VariableSelectionNetworkImpl::project(at::Tensor selected) {
  return output_projection ? output_projection(selected) : selected;
}

bool VariableSelectionNetworkImpl::integer_products_in_use() const {
  for (const auto& module : *variable_grns) {
    if (module->as<GatedResidualNetworkImpl>()->fc1->integer_product_in_use()) return true;
  }
  return false;
}

VariableSelectionOutput VariableSelectionNetworkImpl::forward_per_variable(const at::Tensor& inputs,
                                                                           const at::Tensor& context) {
  check_inputs(inputs);
  // Each variable in memory of its own, as the embeddings of the per-variable model were
  // (a strided input would take a product and a bias addition where these take one addmm).
  std::vector<at::Tensor> variables = inputs.unbind(-2);
  for (at::Tensor& variable : variables) variable = variable.contiguous();
  if (!flattened_grn) {
    auto weight_sizes = inputs.sizes().vec();
    weight_sizes.pop_back();
    weight_sizes.back() = 1;
    return {project(variable_grns->at<GatedResidualNetworkImpl>(0).forward(variables.front())),
            at::ones(weight_sizes, inputs.options())};
  }
  // The selector on the concatenation, as the grouped network's flattened view multiplies it.
  const at::Tensor weights =
      at::softmax(memory::full_precision(flattened_grn->forward(at::cat(variables, -1), context)), -1);
  at::Tensor selected;
  for (size_t i = 0; i < variables.size(); ++i) {
    const at::Tensor weighted = variable_grns->at<GatedResidualNetworkImpl>(i).forward(variables[i]) *
                                weights.narrow(-1, static_cast<int64_t>(i), 1);
    selected = i == 0 ? weighted : selected + weighted;
  }
  return {project(selected), weights};
}

}  // namespace qtft::model
