#include "qtft/eval/metrics.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "qtft/eval/quantile_loss.h"

namespace qtft::eval {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double pinball(double q, double error) { return std::max(q * error, (q - 1.0) * error); }

}  // namespace

int64_t quantile_index(const std::vector<double>& quantiles, double q) {
  for (size_t i = 0; i < quantiles.size(); ++i) {
    if (std::abs(quantiles[i] - q) < 1e-9) return static_cast<int64_t>(i);
  }
  return -1;
}

MetricsAccumulator::MetricsAccumulator(std::vector<double> quantiles) : quantiles_(std::move(quantiles)) {
  check_quantiles(quantiles_);
  median_ = quantile_index(quantiles_, 0.5);
  q90_ = quantile_index(quantiles_, 0.9);
}

void MetricsAccumulator::add(const at::Tensor& forecast, const at::Tensor& target) {
  const auto n_q = static_cast<int64_t>(quantiles_.size());
  TORCH_CHECK(forecast.dim() == 3 && forecast.size(2) == n_q, "MetricsAccumulator: expected forecast [batch, horizon, ",
              n_q, "], got ", forecast.sizes());
  TORCH_CHECK(target.dim() == 2 && target.size(0) == forecast.size(0) && target.size(1) == forecast.size(1),
              "MetricsAccumulator: expected target [", forecast.size(0), ", ", forecast.size(1), "] to match forecast ",
              forecast.sizes(), ", got ", target.sizes());
  // Metrics are read, never differentiated: detach, and sum in double so that float32
  // rounding does not depend on how the windows were split into batches.
  auto options = at::TensorOptions().device(at::kCPU).dtype(at::kDouble);
  auto f = forecast.detach().to(options).contiguous();
  auto y = target.detach().to(options).contiguous();
  const double* fp = f.data_ptr<double>();
  const double* yp = y.data_ptr<double>();
  const int64_t values = y.numel();

  for (int64_t i = 0; i < values; ++i) {
    const double yi = yp[i];
    const double* fi = fp + i * n_q;
    for (int64_t k = 0; k < n_q; ++k) pinball_sum_ += pinball(quantiles_[k], yi - fi[k]);
    if (median_ >= 0) {
      const double e = yi - fi[median_];
      median_pinball_sum_ += pinball(0.5, e);
      squared_error_sum_ += e * e;
      abs_error_sum_ += std::abs(e);
    }
    if (q90_ >= 0) q90_pinball_sum_ += pinball(0.9, yi - fi[q90_]);
    abs_target_sum_ += std::abs(yi);
  }
  count_ += values;
}

ForecastMetrics MetricsAccumulator::result() const {
  ForecastMetrics m{kNaN, kNaN, kNaN, kNaN, kNaN, count_};
  if (count_ == 0) return m;
  const auto n = static_cast<double>(count_);
  m.loss = pinball_sum_ / (n * static_cast<double>(quantiles_.size()));
  if (median_ >= 0) {
    m.rmse = std::sqrt(squared_error_sum_ / n);
    m.mae = abs_error_sum_ / n;
    m.p50 = 2.0 * median_pinball_sum_ / abs_target_sum_;
  }
  if (q90_ >= 0) m.p90 = 2.0 * q90_pinball_sum_ / abs_target_sum_;
  return m;
}

nlohmann::json to_json(const ForecastMetrics& metrics) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {{"loss", number(metrics.loss)}, {"rmse", number(metrics.rmse)}, {"mae", number(metrics.mae)},
          {"p50", number(metrics.p50)},   {"p90", number(metrics.p90)},   {"count", metrics.count}};
}

}  // namespace qtft::eval
