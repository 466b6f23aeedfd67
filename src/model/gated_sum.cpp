#include "qtft/model/detail/gated_sum.h"

#include <ATen/TensorIterator.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/util/BFloat16.h>
#include <torch/csrc/autograd/custom_function.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace qtft::model::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Elements per task at least, as ATen's elementwise kernels split their work.
constexpr int64_t kGrain = 32768;

// The gate's type rounded from float, as ATen rounds a bf16 operation's float result.
template <typename scalar_t>
inline scalar_t round_to(float v) {
  return static_cast<scalar_t>(v);
}

// Forward, one row: out = residual + round(s * value), in float.
template <typename scalar_t>
__attribute__((target_clones("avx2", "default"))) void sum_row(float* out, const float* residual, const scalar_t* s,
                                                               const scalar_t* value, int64_t n) {
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    const float product =
        static_cast<float>(round_to<scalar_t>(static_cast<float>(s[i]) * static_cast<float>(value[i])));
    out[i] = residual[i] + product;
  }
}

// Backward, one row, with g the incoming gradient rounded to the gate's type (as autograd
// rounds the gradient of a bf16 input of an FP32 sum): value's gradient g * s, as at::mul's
// backward forms it; the logits' gradient t * (1 - s) * s with t = g * value rounded to the
// gate's type, as at::sigmoid_backward forms it from the product's gradient t.
template <typename scalar_t>
__attribute__((target_clones("avx2", "default"))) void gradient_row(scalar_t* gate_grad, scalar_t* value_grad,
                                                                    const float* grad, const scalar_t* s,
                                                                    const scalar_t* value, int64_t n) {
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    const float g = static_cast<float>(round_to<scalar_t>(grad[i]));
    const float si = static_cast<float>(s[i]);
    value_grad[i] = round_to<scalar_t>(g * si);
    const float product_grad = static_cast<float>(round_to<scalar_t>(g * static_cast<float>(value[i])));
    gate_grad[i] = round_to<scalar_t>(product_grad * (1.0f - si) * si);
  }
}

// An iterator over `outputs`, then `inputs`, each of its own type (the row kernels know
// them); it owns its operands.
at::TensorIterator iterator_over(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs) {
  at::TensorIteratorConfig config;
  config.check_all_same_dtype(false);
  for (const at::Tensor& output : outputs) config.add_owned_output(output);
  for (const at::Tensor& input : inputs) config.add_owned_const_input(input);
  return config.build();
}

// Rows of `iter`, handed to `row` as pointers to its `Tensors` operands and a length. A row
// whose elements are not adjacent in every operand goes element by element (not met by the
// callers, whose rows are contiguous, but correct for any strides).
template <int64_t Tensors, typename Row>
void for_each_row(at::TensorIterator& iter, const Row& row) {
  std::array<int64_t, Tensors> element_sizes;
  for (int64_t t = 0; t < Tensors; ++t) element_sizes[t] = iter.element_size(t);
  iter.for_each(
      [&](char** data, const int64_t* strides, int64_t size0, int64_t size1) {
        std::array<char*, Tensors> pointers;
        bool contiguous = true;
        for (int64_t t = 0; t < Tensors; ++t) {
          pointers[t] = data[t];
          contiguous = contiguous && strides[t] == element_sizes[t];
        }
        for (int64_t j = 0; j < size1; ++j) {
          if (contiguous) {
            row(pointers.data(), size0);
          } else {
            for (int64_t i = 0; i < size0; ++i) {
              std::array<char*, Tensors> one;
              for (int64_t t = 0; t < Tensors; ++t) one[t] = pointers[t] + i * strides[t];
              row(one.data(), 1);
            }
          }
          for (int64_t t = 0; t < Tensors; ++t) pointers[t] += strides[Tensors + t];
        }
      },
      kGrain);
}

template <typename scalar_t>
at::Tensor fused_sum(const at::Tensor& residual, const at::Tensor& s, const at::Tensor& value) {
  at::Tensor out = at::empty_like(residual, at::MemoryFormat::Contiguous);
  auto iter = iterator_over({out}, {residual, s, value});
  for_each_row<4>(iter, [](char** p, int64_t n) {
    sum_row<scalar_t>(reinterpret_cast<float*>(p[0]), reinterpret_cast<const float*>(p[1]),
                      reinterpret_cast<const scalar_t*>(p[2]), reinterpret_cast<const scalar_t*>(p[3]), n);
  });
  return out;
}

template <typename scalar_t>
std::pair<at::Tensor, at::Tensor> fused_gradients(const at::Tensor& grad, const at::Tensor& s,
                                                  const at::Tensor& value) {
  at::Tensor gate_grad = at::empty_like(s, at::MemoryFormat::Contiguous);
  at::Tensor value_grad = at::empty_like(s, at::MemoryFormat::Contiguous);
  auto iter = iterator_over({gate_grad, value_grad}, {grad, s, value});
  for_each_row<5>(iter, [](char** p, int64_t n) {
    gradient_row<scalar_t>(reinterpret_cast<scalar_t*>(p[0]), reinterpret_cast<scalar_t*>(p[1]),
                           reinterpret_cast<const float*>(p[2]), reinterpret_cast<const scalar_t*>(p[3]),
                           reinterpret_cast<const scalar_t*>(p[4]), n);
  });
  return {gate_grad, value_grad};
}

at::Tensor sum_of(const at::Tensor& residual, const at::Tensor& s, const at::Tensor& value) {
  RECORD_FUNCTION("qtft::gated_residual_sum", std::vector<c10::IValue>());
  return s.scalar_type() == at::kBFloat16 ? fused_sum<c10::BFloat16>(residual, s, value)
                                          : fused_sum<float>(residual, s, value);
}

class GatedResidualSum : public torch::autograd::Function<GatedResidualSum> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& residual, const at::Tensor& gate_logits,
                            const at::Tensor& value) {
    const at::Tensor s = at::sigmoid(gate_logits);
    ctx->save_for_backward({s, value});
    return sum_of(residual, s, value);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    RECORD_FUNCTION("qtft::gated_residual_sum_backward", std::vector<c10::IValue>());
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& grad = grad_outputs[0];
    if (!grad.defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    auto [gate_grad, value_grad] = saved[0].scalar_type() == at::kBFloat16
                                       ? fused_gradients<c10::BFloat16>(grad, saved[0], saved[1])
                                       : fused_gradients<float>(grad, saved[0], saved[1]);
    return {grad, gate_grad, value_grad};
  }
};

bool fusable(const at::Tensor& residual, const at::Tensor& gate_logits, const at::Tensor& value) {
  const auto type = gate_logits.scalar_type();
  return residual.is_cpu() && gate_logits.is_cpu() && value.is_cpu() && (type == at::kFloat || type == at::kBFloat16) &&
         value.scalar_type() == type && residual.scalar_type() == at::kFloat &&
         residual.sizes() == gate_logits.sizes() && value.sizes() == gate_logits.sizes();
}

}  // namespace

at::Tensor unfused_gated_residual_sum(const at::Tensor& residual, const at::Tensor& gate_logits,
                                      const at::Tensor& value) {
  return at::add(residual, at::mul(at::sigmoid(gate_logits), value));
}

at::Tensor gated_residual_sum(const at::Tensor& residual, const at::Tensor& gate_logits, const at::Tensor& value) {
  if (!fusable(residual, gate_logits, value)) return unfused_gated_residual_sum(residual, gate_logits, value);
  if (c10::GradMode::is_enabled() &&
      (residual.requires_grad() || gate_logits.requires_grad() || value.requires_grad())) {
    return GatedResidualSum::apply(residual, gate_logits, value);
  }
  return sum_of(residual, at::sigmoid(gate_logits), value);
}

}  // namespace qtft::model::detail
