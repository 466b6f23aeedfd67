#include "qtft/eval/quantile_loss.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/tensor.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "qtft/common/error.h"

namespace qtft::eval {

void check_quantiles(const std::vector<double>& quantiles) {
  if (quantiles.empty()) throw Error("quantiles: expected at least one quantile, got none");
  for (double q : quantiles) {
    // Written so that NaN fails too.
    if (!(q > 0.0 && q < 1.0)) {
      std::ostringstream message;
      message << "quantiles: every quantile must lie strictly between 0 and 1, got " << q;
      throw Error(message.str());
    }
  }
}

at::Tensor quantile_loss(const at::Tensor& forecast, const at::Tensor& target, const std::vector<double>& quantiles) {
  check_quantiles(quantiles);
  TORCH_CHECK(forecast.dim() == 3, "quantile_loss: expected forecast [batch, horizon, quantiles], got ", forecast.dim(),
              " dimensions ", forecast.sizes());
  TORCH_CHECK(at::isFloatingType(forecast.scalar_type()), "quantile_loss: expected a floating forecast, got ",
              forecast.scalar_type());
  TORCH_CHECK(target.dim() == 2 && target.size(0) == forecast.size(0) && target.size(1) == forecast.size(1),
              "quantile_loss: expected target [", forecast.size(0), ", ", forecast.size(1), "] to match forecast ",
              forecast.sizes(), ", got ", target.sizes());
  TORCH_CHECK(forecast.size(2) == static_cast<int64_t>(quantiles.size()), "quantile_loss: forecast has ",
              forecast.size(2), " quantile outputs but ", quantiles.size(), " quantiles were given");

  // Built as double, then cast: the quantiles are exact in the loss's own dtype and device.
  auto q = at::tensor(quantiles, at::TensorOptions().dtype(at::kDouble)).to(forecast.device(), forecast.scalar_type());
  auto error = target.to(forecast.device(), forecast.scalar_type()).unsqueeze(-1) - forecast;  // [B, H, Q]
  return at::maximum(q * error, (q - 1.0) * error).mean();
}

}  // namespace qtft::eval
