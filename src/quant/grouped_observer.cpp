#include "qtft/quant/grouped_observer.h"

#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/stack.h>
#include <c10/core/GradMode.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/Exception.h>

#include <optional>
#include <utility>

#include "qtft/memory/autocast.h"
#include "qtft/quant/detail/fake_quantize.h"

namespace qtft::quant {
namespace {

// Each slice's [min, max] along dim: [n, 2]. Minimum and maximum are exact in any order of
// reduction, so each row is what the slice's own aminmax gives.
at::Tensor slice_extremes(const at::Tensor& x, int64_t dim) {
  c10::NoGradGuard no_grad;
  const int64_t n = x.size(dim);
  if (dim == 0) {
    auto [min, max] = at::aminmax(x.reshape({n, -1}), 1);
    return at::stack({min, max}, 1);
  }
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= x.size(d);
  const at::Tensor grouped = x.reshape({outer, n, -1});
  return at::stack({at::amin(grouped, {0, 2}), at::amax(grouped, {0, 2})}, 1);
}

}  // namespace

at::Tensor observe_slices(const std::vector<ActivationFakeQuantImpl*>& observers, at::Tensor x, int64_t dim,
                          bool observe) {
  if (x.defined()) x = memory::full_precision(x);  // as ActivationFakeQuantImpl::forward
  TORCH_CHECK(x.defined() && x.scalar_type() == at::kFloat && x.numel() > 0,
              "observe_slices: expected a non-empty float32 tensor");
  dim = c10::maybe_wrap_dim(dim, x.dim());
  TORCH_CHECK(x.size(dim) == static_cast<int64_t>(observers.size()), "observe_slices: ", observers.size(),
              " observers for ", x.size(dim), " slices along dimension ", dim);
  at::Tensor extremes;  // computed when the first observer asks
  std::vector<std::optional<ActivationFakeQuantImpl::Parameters>> parameters;
  parameters.reserve(observers.size());
  for (size_t i = 0; i < observers.size(); ++i) {
    if (!observe) {
      parameters.push_back(observers[i]->reapply_parameters());
      continue;
    }
    parameters.push_back(observers[i]->forward_parameters([&] {
      if (!extremes.defined()) extremes = slice_extremes(x, dim);
      return extremes[static_cast<int64_t>(i)];
    }));
  }
  size_t with_parameters = 0;
  for (const auto& p : parameters) with_parameters += p.has_value() ? 1 : 0;
  if (with_parameters == 0) return x;
  if (with_parameters < parameters.size()) {
    std::vector<at::Tensor> slices = x.unbind(dim);
    for (size_t i = 0; i < slices.size(); ++i) {
      if (!parameters[i]) continue;
      slices[i] = fake_quantize_per_tensor(slices[i], parameters[i]->scale, parameters[i]->zero_point,
                                           observers[i]->range().qmin, observers[i]->range().qmax);
    }
    return at::stack(slices, dim);
  }
  std::vector<at::Tensor> scales, zero_points;
  for (const auto& p : parameters) {
    scales.push_back(p->scale);
    zero_points.push_back(p->zero_point);
  }
  const QuantRange range = observers.front()->range();
  for (const ActivationFakeQuantImpl* observer : observers) {
    TORCH_CHECK(observer->range().qmin == range.qmin && observer->range().qmax == range.qmax,
                "observe_slices: the observers quantize to different ranges");
  }
  return fake_quantize_per_slice(std::move(x), dim, scales, zero_points, range.qmin, range.qmax);
}

}  // namespace qtft::quant
