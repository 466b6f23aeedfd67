#include "qtft/model/variable_selection_network.h"

#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/stack.h>
#include <c10/util/Exception.h>

#include <vector>

namespace qtft::model {

VariableSelectionNetworkImpl::VariableSelectionNetworkImpl(VariableSelectionNetworkOptions options)
    : options_(options) {
  const auto& o = options_;
  TORCH_CHECK(o.num_inputs() > 0 && o.hidden_size() > 0, "VariableSelectionNetwork: expected positive num_inputs and "
              "hidden_size, got ", o.num_inputs(), " and ", o.hidden_size());
  if (o.num_inputs() > 1) {
    flattened_grn = register_module(
        "flattened_grn", GatedResidualNetwork(GatedResidualNetworkOptions(o.num_inputs() * o.hidden_size(),
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

  std::vector<at::Tensor> processed;
  processed.reserve(static_cast<size_t>(o.num_inputs()));
  for (int64_t i = 0; i < o.num_inputs(); ++i) {
    processed.push_back(variable_grns->at<GatedResidualNetworkImpl>(static_cast<size_t>(i)).forward(inputs.select(-2, i)));
  }
  if (!flattened_grn) {
    // One input: the context could only steer a choice there is not, so it is not used.
    auto weight_sizes = inputs.sizes().vec();
    weight_sizes.pop_back();  // [..., 1]
    return {processed.front(), at::ones(weight_sizes, inputs.options())};
  }
  const at::Tensor weights = at::softmax(flattened_grn(inputs.flatten(-2), context), -1);
  const at::Tensor stacked = at::stack(processed, -2);  // [..., n, hidden]
  return {(stacked * weights.unsqueeze(-1)).sum(-2), weights};
}

}  // namespace qtft::model
