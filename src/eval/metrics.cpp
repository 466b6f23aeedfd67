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

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Metrics are read, never differentiated: detach, and sum in double so that float32
// rounding does not depend on how the windows were split into batches.
at::Tensor as_doubles(const at::Tensor& t) {
  return t.detach().to(at::TensorOptions().device(at::kCPU).dtype(at::kDouble)).contiguous();
}

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

void MetricsAccumulator::check_shapes(const at::Tensor& forecast, const at::Tensor& target) const {
  const auto n_q = static_cast<int64_t>(quantiles_.size());
  TORCH_CHECK(forecast.dim() == 3 && forecast.size(2) == n_q, "MetricsAccumulator: expected forecast [batch, horizon, ",
              n_q, "], got ", forecast.sizes());
  TORCH_CHECK(target.dim() == 2 && target.size(0) == forecast.size(0) && target.size(1) == forecast.size(1),
              "MetricsAccumulator: expected target [", forecast.size(0), ", ", forecast.size(1), "] to match forecast ",
              forecast.sizes(), ", got ", target.sizes());
}

void MetricsAccumulator::add(const at::Tensor& forecast, const at::Tensor& target) {
  check_shapes(forecast, target);
  const auto f = as_doubles(forecast), y = as_doubles(target);
  accumulate(f.data_ptr<double>(), y.data_ptr<double>(), y.numel(), scaled_);
  count_ += y.numel();
}

void MetricsAccumulator::add(const at::Tensor& forecast, const at::Tensor& target, const WindowUnits& units) {
  check_shapes(forecast, target);
  const int64_t windows = forecast.size(0), horizon = forecast.size(1);
  const auto n_q = static_cast<int64_t>(quantiles_.size());
  TORCH_CHECK(
      static_cast<int64_t>(units.scale.size()) == windows && static_cast<int64_t>(units.center.size()) == windows,
      "MetricsAccumulator: expected a scale and a center for each of the ", windows, " windows, got ",
      units.scale.size(), " and ", units.center.size());
  const auto f = as_doubles(forecast), y = as_doubles(target);
  accumulate(f.data_ptr<double>(), y.data_ptr<double>(), y.numel(), scaled_);
  count_ += y.numel();
  // The same values taken back, in copies: `as_doubles` may have returned the caller's tensor.
  auto f_units = f.clone(), y_units = y.clone();
  double* fp = f_units.data_ptr<double>();
  double* yp = y_units.data_ptr<double>();
  for (int64_t b = 0; b < windows; ++b) {
    const double scale = units.scale[static_cast<size_t>(b)], center = units.center[static_cast<size_t>(b)];
    for (int64_t i = b * horizon; i < (b + 1) * horizon; ++i) yp[i] = yp[i] * scale + center;
    for (int64_t i = b * horizon * n_q; i < (b + 1) * horizon * n_q; ++i) fp[i] = fp[i] * scale + center;
  }
  accumulate(fp, yp, y_units.numel(), units_);
  units_count_ += y_units.numel();
}

void MetricsAccumulator::accumulate(const double* forecast, const double* target, int64_t values, Sums& sums) const {
  const auto n_q = static_cast<int64_t>(quantiles_.size());
  for (int64_t i = 0; i < values; ++i) {
    const double yi = target[i];
    const double* fi = forecast + i * n_q;
    for (int64_t k = 0; k < n_q; ++k) sums.pinball += pinball(quantiles_[k], yi - fi[k]);
    if (median_ >= 0) {
      const double e = yi - fi[median_];
      sums.median_pinball += pinball(0.5, e);
      sums.squared_error += e * e;
      sums.abs_error += std::abs(e);
    }
    if (q90_ >= 0) sums.q90_pinball += pinball(0.9, yi - fi[q90_]);
    sums.abs_target += std::abs(yi);
  }
}

TargetUnitFigures MetricsAccumulator::figures(const Sums& sums, int64_t count) const {
  TargetUnitFigures m{kNaN, kNaN, kNaN, kNaN, kNaN};
  if (count == 0) return m;
  const auto n = static_cast<double>(count);
  m.loss = sums.pinball / (n * static_cast<double>(quantiles_.size()));
  if (median_ >= 0) {
    m.rmse = std::sqrt(sums.squared_error / n);
    m.mae = sums.abs_error / n;
    m.p50 = 2.0 * sums.median_pinball / sums.abs_target;
  }
  if (q90_ >= 0) m.p90 = 2.0 * sums.q90_pinball / sums.abs_target;
  return m;
}

ForecastMetrics MetricsAccumulator::result() const {
  const auto scaled = figures(scaled_, count_);
  ForecastMetrics m{scaled.loss, scaled.rmse, scaled.mae, scaled.p50, scaled.p90, count_};
  // Partly converted sums would mix units: all windows or none.
  m.in_target_units = figures(units_, units_count_ == count_ ? units_count_ : 0);
  return m;
}

nlohmann::json to_json(const ForecastMetrics& metrics) {
  nlohmann::json j{{"loss", number(metrics.loss)}, {"rmse", number(metrics.rmse)}, {"mae", number(metrics.mae)},
                   {"p50", number(metrics.p50)},   {"p90", number(metrics.p90)},   {"count", metrics.count}};
  if (std::isfinite(metrics.in_target_units.loss)) j["in_target_units"] = to_json(metrics.in_target_units);
  return j;
}

nlohmann::json to_json(const TargetUnitFigures& f) {
  return {{"loss", number(f.loss)},
          {"rmse", number(f.rmse)},
          {"mae", number(f.mae)},
          {"p50", number(f.p50)},
          {"p90", number(f.p90)}};
}

TargetUnitFigures target_unit_figures_from_json(const nlohmann::json& j) {
  auto read = [&](const char* key) {
    return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : kNaN;
  };
  return {read("loss"), read("rmse"), read("mae"), read("p50"), read("p90")};
}

}  // namespace qtft::eval
