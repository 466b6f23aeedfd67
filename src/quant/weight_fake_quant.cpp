#include "qtft/quant/detail/weight_fake_quant.h"

#include <ATen/ops/fake_quantize_per_channel_affine.h>
#include <ATen/ops/zeros.h>
#include <c10/core/WrapDimMinimal.h>

#include "qtft/quant/quant_params.h"

namespace qtft::quant {

at::Tensor fake_quantize_weight(const at::Tensor& w, int64_t bits, int64_t axis) {
  const QuantRange range = weight_range(bits);
  const int64_t dim = c10::maybe_wrap_dim(axis, w.dim());
  const at::Tensor scales = symmetric_per_channel_scales(w, dim, range.qmax);
  const at::Tensor zero_points = at::zeros({scales.size(0)}, scales.options().dtype(at::kInt));
  return at::fake_quantize_per_channel_affine(w, scales, zero_points, dim, range.qmin, range.qmax);
}

}  // namespace qtft::quant
