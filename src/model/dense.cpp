#include "qtft/model/dense.h"

#include <c10/util/Exception.h>

namespace qtft::model {

DenseImpl::DenseImpl(DenseOptions options) : options_(options) {
  linear = register_module("linear", torch::nn::Linear(torch::nn::LinearOptions(options.in_features(), options.out_features())
                                                           .bias(options.bias())));
}

at::Tensor DenseImpl::forward(const at::Tensor& x) {
  // Checked here because the matmul's own message names neither layer nor expected size.
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == options_.in_features(), "Dense: expected input with ",
              options_.in_features(), " features in the last dimension, got shape ", x.sizes());
  return linear(x);
}

}  // namespace qtft::model
