#include "qtft/model/variable_selection_network.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <vector>

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
  return forward_blocks(inputs, context, memory::BlockCheckpointing());
}

VariableSelectionOutput VariableSelectionNetworkImpl::forward_blocks(const at::Tensor& inputs,
                                                                     const at::Tensor& context,
                                                                     const memory::BlockCheckpointing& blocks) {
  check_inputs(inputs);
  if (integer_products_in_use()) return forward_per_variable(inputs, context);
  using Tensors = std::vector<at::Tensor>;
  if (!flattened_grn) {
    // One input: the context could only steer a choice there is not, so it is not used.
    const at::Tensor processed = blocks.run_one("variable_selection", {inputs}, [this](const Tensors& in) {
      return Tensors{project(variable_grns->at<GatedResidualNetworkImpl>(0).forward(in[0].select(-2, 0)))};
    });
    auto weight_sizes = inputs.sizes().vec();
    weight_sizes.pop_back();
    weight_sizes.back() = 1;  // [..., 1]
    return {processed, at::ones(weight_sizes, inputs.options())};
  }
  const bool has_context = context.defined();
  const Tensors selector_inputs = has_context ? Tensors{inputs, context} : Tensors{inputs};
  const at::Tensor weights = blocks.run_one("selection_weights", selector_inputs, [this](const Tensors& in) {
    return Tensors{selection_weights(in[0], in.size() > 1 ? in[1] : at::Tensor())};
  });
  const at::Tensor selected = blocks.run_one("selected_variables", {inputs, weights}, [this](const Tensors& in) {
    return Tensors{selected_variables(in[0], in[1])};
  });
  return {selected, weights};
}

at::Tensor VariableSelectionNetworkImpl::selection_weights(const at::Tensor& inputs, const at::Tensor& context) {
  // [..., n, width] -> [..., n * width]: the concatenation, without a copy when contiguous.
  return at::softmax(flattened_grn->forward(inputs.flatten(-2), context), -1);
}

at::Tensor VariableSelectionNetworkImpl::selected_variables(const at::Tensor& inputs, const at::Tensor& weights) {
  const int64_t n = options_.num_inputs(), width = options_.variable_width();
  std::vector<GatedResidualNetworkImpl*> grns;
  for (const auto& module : *variable_grns) grns.push_back(module->as<GatedResidualNetworkImpl>());
  const at::Tensor rows = inputs.reshape({-1, n, width});
  const at::Tensor residual = grouped_grn_residual(grns, rows.transpose(0, 1));  // [n, rows, width]
  const at::Tensor row_weights = weights.reshape({-1, n});
  // Each variable's layer norm and weight in variable order, as the per-variable sum adds them.
  at::Tensor selected;
  for (int64_t i = 0; i < n; ++i) {
    const at::Tensor weighted =
        grns[static_cast<size_t>(i)]->layer_norm(residual.select(0, i)) * row_weights.narrow(-1, i, 1);
    selected = i == 0 ? weighted : selected + weighted;
  }
  std::vector<int64_t> sizes = inputs.sizes().vec();
  sizes.pop_back();
  sizes.back() = width;  // [..., width]
  return project(selected.reshape(sizes));
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
  const at::Tensor weights = at::softmax(flattened_grn->forward(at::cat(variables, -1), context), -1);
  at::Tensor selected;
  for (size_t i = 0; i < variables.size(); ++i) {
    const at::Tensor weighted = variable_grns->at<GatedResidualNetworkImpl>(i).forward(variables[i]) *
                                weights.narrow(-1, static_cast<int64_t>(i), 1);
    selected = i == 0 ? weighted : selected + weighted;
  }
  return {project(selected), weights};
}

}  // namespace qtft::model
