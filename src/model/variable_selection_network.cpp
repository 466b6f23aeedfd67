#include "qtft/model/variable_selection_network.h"

#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <vector>

namespace qtft::model {

VariableSelectionNetworkImpl::VariableSelectionNetworkImpl(VariableSelectionNetworkOptions options)
    : options_(options) {
  const auto& o = options_;
  TORCH_CHECK(o.num_inputs() > 0 && o.hidden_size() > 0,
              "VariableSelectionNetwork: expected positive num_inputs and "
              "hidden_size, got ",
              o.num_inputs(), " and ", o.hidden_size());
  if (o.num_inputs() > 1) {
    flattened_grn = register_module("flattened_grn",
                                    GatedResidualNetwork(GatedResidualNetworkOptions(o.num_inputs() * o.hidden_size(),
                                                                                     o.hidden_size(), o.num_inputs())
                                                             .dropout(o.dropout())
                                                             .context_size(o.context_size())));
  }
  variable_grns = register_module("variable_grns", torch::nn::ModuleList());
  for (int64_t i = 0; i < o.num_inputs(); ++i) {
    variable_grns->push_back(GatedResidualNetwork(
        GatedResidualNetworkOptions(o.hidden_size(), o.hidden_size(), o.hidden_size()).dropout(o.dropout())));
  }
}

VariableSelectionOutput VariableSelectionNetworkImpl::forward(const at::Tensor& inputs, const at::Tensor& context) {
  const auto& o = options_;
  TORCH_CHECK(inputs.dim() >= 2 && inputs.size(-2) == o.num_inputs() && inputs.size(-1) == o.hidden_size(),
              "VariableSelectionNetwork: expected inputs [..., ", o.num_inputs(), ", ", o.hidden_size(),
              "], got shape ", inputs.sizes());
  return forward_variables(inputs.unbind(-2), context, memory::BlockCheckpointing());
}

VariableSelectionOutput VariableSelectionNetworkImpl::forward_variables(const std::vector<at::Tensor>& inputs,
                                                                        const at::Tensor& context,
                                                                        const memory::BlockCheckpointing& blocks) {
  const auto& o = options_;
  const auto n = static_cast<size_t>(o.num_inputs());
  TORCH_CHECK(inputs.size() == n, "VariableSelectionNetwork: expected ", n, " inputs, got ", inputs.size());
  for (const at::Tensor& x : inputs) {
    TORCH_CHECK(x.dim() >= 1 && x.size(-1) == o.hidden_size() && x.sizes() == inputs.front().sizes(),
                "VariableSelectionNetwork: expected inputs [..., ", o.hidden_size(), "] of one shape, got ", x.sizes(),
                " and ", inputs.front().sizes());
  }
  using Tensors = std::vector<at::Tensor>;
  if (!flattened_grn) {
    // One input: the context could only steer a choice there is not, so it is not used.
    const Tensors processed = blocks.run("variable_selection", {inputs.front()}, [this](const Tensors& in) {
      return Tensors{variable_grns->at<GatedResidualNetworkImpl>(0).forward(in[0])};
    });
    auto weight_sizes = inputs.front().sizes().vec();
    weight_sizes.back() = 1;  // [..., 1]
    return {processed.front(), at::ones(weight_sizes, inputs.front().options())};
  }

  // Each segment runs one GRN over one variable (or the selector over all of them),
  // so a recompute holds a single GRN's activations; the weighted sum is accumulated
  // segment by segment, and the processed inputs are never all held at once.
  Tensors selector_inputs = inputs;
  const bool has_context = context.defined();
  if (has_context) selector_inputs.push_back(context);
  const at::Tensor weights =
      blocks.run_one("selection_weights", selector_inputs, [this, n, has_context](const Tensors& in) {
        const Tensors embedded(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
        return Tensors{
            at::softmax(flattened_grn->forward_concatenated(embedded, has_context ? in[n] : at::Tensor()), -1)};
      });
  at::Tensor selected;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor weighted = blocks.run_one("selected_variable", {inputs[i], weights}, [this, i](const Tensors& in) {
      const auto v = static_cast<int64_t>(i);
      return Tensors{variable_grns->at<GatedResidualNetworkImpl>(i).forward(in[0]) * in[1].narrow(-1, v, 1)};
    });
    selected = i == 0 ? weighted : selected + weighted;
  }
  return {selected, weights};
}

}  // namespace qtft::model
