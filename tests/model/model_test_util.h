#pragma once

// Small helpers shared by the model tests: literal tensors and hand-set parameters.

#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <initializer_list>
#include <vector>

namespace qtft::test {

// A float tensor with the given values and shape (row-major), e.g. literal({1, 2, 3, 4}, {2, 2}).
inline at::Tensor literal(std::initializer_list<double> values, at::IntArrayRef shape,
                          at::ScalarType dtype = at::kFloat) {
  return at::tensor(std::vector<double>(values), at::TensorOptions().dtype(at::kDouble)).view(shape).to(dtype);
}

// Overwrites a parameter in place (outside autograd), keeping its shape, dtype and device.
inline void set_values(const at::Tensor& parameter, std::initializer_list<double> values) {
  c10::NoGradGuard no_grad;
  parameter.copy_(literal(values, parameter.sizes(), parameter.scalar_type()));
}

// LayerNorm of two values x0, x1 with unit weight and zero bias: both deviate from the mean
// by d = (x0 - x1) / 2, the biased variance is d^2, so the outputs are +-d / sqrt(d^2 + eps).
inline std::vector<double> layer_norm_pair(double x0, double x1, double eps = 1e-5) {
  const double d = (x0 - x1) / 2;
  const double scale = 1.0 / std::sqrt(d * d + eps);
  return {d * scale, -d * scale};
}

}  // namespace qtft::test
