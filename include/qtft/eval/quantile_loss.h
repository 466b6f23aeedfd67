#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace qtft::eval {

// Throws qtft::Error unless `quantiles` is non-empty and every value lies strictly in (0, 1):
// quantile lists come from flags and files, so a bad one is a user's mistake, not ours.
void check_quantiles(const std::vector<double>& quantiles);

// The pinball (quantile) loss of the TFT paper, averaged over batch, horizon and quantiles:
//   mean over b, h, k of  max(q_k * (y - f_k), (q_k - 1) * (y - f_k))
// forecast: [B, H, Q] on any device, floating; target: [B, H] (converted to the forecast's
// dtype and device). Differentiable with respect to the forecast: each element's gradient is
// -q_k / N where y > f_k and (1 - q_k) / N where y < f_k, with N = B * H * Q.
at::Tensor quantile_loss(const at::Tensor& forecast, const at::Tensor& target, const std::vector<double>& quantiles);

}  // namespace qtft::eval
