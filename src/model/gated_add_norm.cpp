#include "qtft/model/detail/gated_add_norm.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace qtft::model::detail {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Independent partial sums: the compiler keeps one per vector lane, so the row sums
// vectorize without reassociating anything (their order is fixed by this constant alone).
constexpr int64_t kLanes = 8;
// Rows per task, and per partial sum of the weight's and bias's gradients: fixed, so those
// sums do not depend on how at::parallel_for splits the rows.
constexpr int64_t kRowsPerChunk = 64;

template <typename T>
T lane_sum(const T (&partial)[kLanes]) {
  return ((partial[0] + partial[1]) + (partial[2] + partial[3])) +
         ((partial[4] + partial[5]) + (partial[6] + partial[7]));
}

// Sum of x[0, d), in kLanes partial sums and then the tail.
template <typename T>
T row_sum(const T* x, int64_t d) {
  T partial[kLanes] = {};
  const int64_t body = d - d % kLanes;
  for (int64_t c = 0; c < body; c += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) partial[j] += x[c + j];
  }
  T sum = lane_sum(partial);
  for (int64_t c = body; c < d; ++c) sum += x[c];
  return sum;
}

// Sum of (x - mean)^2 over x[0, d).
template <typename T>
T row_squared_deviation(const T* x, T mean, int64_t d) {
  T partial[kLanes] = {};
  const int64_t body = d - d % kLanes;
  for (int64_t c = 0; c < body; c += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      const T deviation = x[c + j] - mean;
      partial[j] += deviation * deviation;
    }
  }
  T sum = lane_sum(partial);
  for (int64_t c = body; c < d; ++c) sum += (x[c] - mean) * (x[c] - mean);
  return sum;
}

// Sum of a * b over [0, d).
template <typename T>
T row_dot(const T* a, const T* b, int64_t d) {
  T partial[kLanes] = {};
  const int64_t body = d - d % kLanes;
  for (int64_t c = 0; c < body; c += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) partial[j] += a[c + j] * b[c + j];
  }
  T sum = lane_sum(partial);
  for (int64_t c = body; c < d; ++c) sum += a[c] * b[c];
  return sum;
}

template <typename T>
struct ForwardRows {
  const T* linear;
  const T* sigmoid;
  const T* skip;
  const T* weight;
  const T* bias;
  T* out;
  T* normalized;   // null when no gradient is wanted
  T* inverse_std;  // likewise
  int64_t d;
  T eps;
};

// One row: y = skip + s * linear, then (y - mean) / sqrt(var + eps) * weight + bias, with the
// biased variance, as ATen's LayerNorm. y is held in `out` until it is normalized.
template <typename T>
__attribute__((target_clones("avx2", "default"))) void forward_rows(const ForwardRows<T>& a, int64_t begin,
                                                                    int64_t end) {
  const int64_t d = a.d;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r * d;
    T* out = a.out + o;
    for (int64_t c = 0; c < d; ++c) out[c] = a.skip[o + c] + a.sigmoid[o + c] * a.linear[o + c];
    const T mean = row_sum(out, d) / static_cast<T>(d);
    const T variance = row_squared_deviation(out, mean, d) / static_cast<T>(d);
    const T inverse_std = static_cast<T>(1) / std::sqrt(variance + a.eps);
    if (a.normalized != nullptr) {
      a.inverse_std[r] = inverse_std;
      for (int64_t c = 0; c < d; ++c) a.normalized[o + c] = (out[c] - mean) * inverse_std;
    }
    for (int64_t c = 0; c < d; ++c) out[c] = (out[c] - mean) * inverse_std * a.weight[c] + a.bias[c];
  }
}

template <typename T>
struct BackwardRows {
  const T* grad_out;
  const T* linear;
  const T* sigmoid;
  const T* normalized;
  const T* inverse_std;
  const T* weight;
  T* grad_linear;
  T* grad_gate;
  T* grad_skip;
  T* grad_weight_partial;  // [chunks, d]
  T* grad_bias_partial;    // [chunks, d]
  int64_t d;
};

// Rows [begin, end) of one chunk. With g = grad_out * weight and x^ the normalized row, the
// LayerNorm's input gradient is inverse_std * (g - mean(g) - x^ * mean(g * x^)); it is the
// skip's gradient, times s the linear half's, and times linear * s * (1 - s) the gate's.
template <typename T>
__attribute__((target_clones("avx2", "default"))) void backward_rows(const BackwardRows<T>& a, int64_t chunk,
                                                                     int64_t begin, int64_t end) {
  const int64_t d = a.d;
  T* grad_weight = a.grad_weight_partial + chunk * d;
  T* grad_bias = a.grad_bias_partial + chunk * d;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t o = r * d;
    const T* grad_out = a.grad_out + o;
    const T* normalized = a.normalized + o;
    T* g = a.grad_skip + o;  // g first, the skip's gradient after
    for (int64_t c = 0; c < d; ++c) {
      g[c] = grad_out[c] * a.weight[c];
      grad_weight[c] += grad_out[c] * normalized[c];
      grad_bias[c] += grad_out[c];
    }
    const T mean_g = row_sum(g, d) / static_cast<T>(d);
    const T mean_gx = row_dot(g, normalized, d) / static_cast<T>(d);
    const T inverse_std = a.inverse_std[r];
    for (int64_t c = 0; c < d; ++c) {
      const T grad_sum = inverse_std * (g[c] - mean_g - normalized[c] * mean_gx);
      const T s = a.sigmoid[o + c];
      g[c] = grad_sum;
      a.grad_linear[o + c] = grad_sum * s;
      a.grad_gate[o + c] = grad_sum * a.linear[o + c] * s * (static_cast<T>(1) - s);
    }
  }
}

// sum[c] = partial[0][c] + partial[1][c] + ... in that order, for c in [0, d).
template <typename T>
void sum_chunks(const T* partial, int64_t chunks, int64_t d, T* sum) {
  std::copy(partial, partial + d, sum);
  for (int64_t chunk = 1; chunk < chunks; ++chunk) {
    const T* row = partial + chunk * d;
    for (int64_t c = 0; c < d; ++c) sum[c] += row[c];
  }
}

struct Forward {
  at::Tensor out, sigmoid, normalized, inverse_std;
};

Forward forward_cpu(const at::Tensor& linear, const at::Tensor& gate, const at::Tensor& skip, const at::Tensor& weight,
                    const at::Tensor& bias, double eps, bool for_backward) {
  // Not an ATen op: named here so that profiles show its time instead of the caller's.
  RECORD_FUNCTION("qtft::gated_add_norm", std::vector<c10::IValue>());
  const int64_t d = linear.size(-1);
  const int64_t rows = linear.numel() / std::max<int64_t>(d, 1);
  Forward f;
  f.sigmoid = at::sigmoid(gate);
  f.out = at::empty(linear.sizes(), linear.options());
  if (for_backward) {
    f.normalized = at::empty(linear.sizes(), linear.options());
    f.inverse_std = at::empty({rows}, linear.options());
  }
  AT_DISPATCH_FLOATING_TYPES(linear.scalar_type(), "qtft::gated_add_norm", [&] {
    const ForwardRows<scalar_t> a{linear.data_ptr<scalar_t>(),
                                  f.sigmoid.data_ptr<scalar_t>(),
                                  skip.data_ptr<scalar_t>(),
                                  weight.data_ptr<scalar_t>(),
                                  bias.data_ptr<scalar_t>(),
                                  f.out.data_ptr<scalar_t>(),
                                  for_backward ? f.normalized.data_ptr<scalar_t>() : nullptr,
                                  for_backward ? f.inverse_std.data_ptr<scalar_t>() : nullptr,
                                  d,
                                  static_cast<scalar_t>(eps)};
    at::parallel_for(0, rows, kRowsPerChunk, [&](int64_t begin, int64_t end) { forward_rows(a, begin, end); });
  });
  return f;
}

class GatedAddNorm : public torch::autograd::Function<GatedAddNorm> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& linear, const at::Tensor& gate,
                            const at::Tensor& skip, const at::Tensor& weight, const at::Tensor& bias, double eps) {
    Forward f = forward_cpu(linear, gate, skip, weight, bias, eps, /*for_backward=*/true);
    ctx->save_for_backward({linear, f.sigmoid, f.normalized, f.inverse_std, weight});
    return f.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    RECORD_FUNCTION("qtft::gated_add_norm_backward", std::vector<c10::IValue>());
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& linear = saved[0];
    const at::Tensor grad_out = grad_outputs[0].contiguous();
    const int64_t d = linear.size(-1);
    const int64_t rows = linear.numel() / std::max<int64_t>(d, 1);
    const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
    at::Tensor grad_linear = at::empty(linear.sizes(), linear.options());
    at::Tensor grad_gate = at::empty(linear.sizes(), linear.options());
    at::Tensor grad_skip = at::empty(linear.sizes(), linear.options());
    at::Tensor grad_weight_partial = at::zeros({chunks, d}, linear.options());
    at::Tensor grad_bias_partial = at::zeros({chunks, d}, linear.options());
    AT_DISPATCH_FLOATING_TYPES(linear.scalar_type(), "qtft::gated_add_norm_backward", [&] {
      const BackwardRows<scalar_t> a{grad_out.data_ptr<scalar_t>(),          linear.data_ptr<scalar_t>(),
                                     saved[1].data_ptr<scalar_t>(),          saved[2].data_ptr<scalar_t>(),
                                     saved[3].data_ptr<scalar_t>(),          saved[4].data_ptr<scalar_t>(),
                                     grad_linear.data_ptr<scalar_t>(),       grad_gate.data_ptr<scalar_t>(),
                                     grad_skip.data_ptr<scalar_t>(),         grad_weight_partial.data_ptr<scalar_t>(),
                                     grad_bias_partial.data_ptr<scalar_t>(), d};
      at::parallel_for(0, chunks, 1, [&](int64_t first, int64_t last) {
        for (int64_t chunk = first; chunk < last; ++chunk) {
          backward_rows(a, chunk, chunk * kRowsPerChunk, std::min(rows, (chunk + 1) * kRowsPerChunk));
        }
      });
    });
    // The chunks' partial sums added in chunk order: the same on any number of threads.
    at::Tensor grad_weight = at::empty({d}, linear.options());
    at::Tensor grad_bias = at::empty({d}, linear.options());
    AT_DISPATCH_FLOATING_TYPES(linear.scalar_type(), "qtft::gated_add_norm_backward", [&] {
      sum_chunks(grad_weight_partial.data_ptr<scalar_t>(), chunks, d, grad_weight.data_ptr<scalar_t>());
      sum_chunks(grad_bias_partial.data_ptr<scalar_t>(), chunks, d, grad_bias.data_ptr<scalar_t>());
    });
    return {grad_linear, grad_gate, grad_skip, grad_weight, grad_bias, at::Tensor()};
  }
};

}  // namespace

at::Tensor gated_add_norm(const at::Tensor& linear, const at::Tensor& gate, const at::Tensor& skip,
                          const at::Tensor& weight, const at::Tensor& bias, double eps) {
  const bool own_kernel =
      linear.is_cpu() && (linear.scalar_type() == at::kFloat || linear.scalar_type() == at::kDouble) &&
      linear.dim() >= 1 && linear.numel() > 0 && gate.sizes() == linear.sizes() && skip.sizes() == linear.sizes() &&
      gate.scalar_type() == linear.scalar_type() && skip.scalar_type() == linear.scalar_type() && weight.defined() &&
      bias.defined() && weight.dim() == 1 && bias.dim() == 1 && weight.size(0) == linear.size(-1) &&
      bias.size(0) == linear.size(-1) && weight.scalar_type() == linear.scalar_type() &&
      bias.scalar_type() == linear.scalar_type() && gate.is_cpu() && skip.is_cpu() && weight.is_cpu() && bias.is_cpu();
  if (!own_kernel) {
    return at::layer_norm(at::add(skip, at::mul(at::sigmoid(gate), linear)), {linear.size(-1)}, weight, bias, eps);
  }
  const at::Tensor l = linear.contiguous();
  const at::Tensor g = gate.contiguous();
  const at::Tensor s = skip.contiguous();
  const at::Tensor w = weight.contiguous();
  const at::Tensor b = bias.contiguous();
  if (!c10::GradMode::is_enabled()) return forward_cpu(l, g, s, w, b, eps, /*for_backward=*/false).out;
  return GatedAddNorm::apply(l, g, s, w, b, eps);
}

}  // namespace qtft::model::detail
