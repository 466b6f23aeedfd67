#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace qtft::eval {

// The five figures of ForecastMetrics in the target's own units (the transformed column
// before scaling: a one-bar log return by default), each window's values taken back with its
// series' center and scale. Under a pooled scale the loss, rmse and mae are the scaled ones
// times the scale; under per-series normalization they are the figures a desk can compare
// across series.
struct TargetUnitFigures {
  double loss = 0.0, rmse = 0.0, mae = 0.0, p50 = 0.0, p90 = 0.0;
};

// Forecast quality over a set of windows. Every figure is in the scaled target units of
// docs/DATA.md (one-bar log return / training-split std), the units the model predicts,
// except in_target_units. A figure with nothing to measure is NaN: all of them when count is
// 0; rmse, mae and p50 when 0.5 is not among the quantiles; p90 when 0.9 is not; every one of
// in_target_units unless each window was added with its units.
struct ForecastMetrics {
  double loss = 0.0;  // mean pinball loss over windows, horizon steps and quantiles (= quantile_loss)
  double rmse = 0.0;  // of the median (0.5 quantile) forecast
  double mae = 0.0;   // of the median forecast
  double p50 = 0.0;   // TFT paper's normalized quantile loss: 2 * sum pinball_0.5 / sum |y|
  double p90 = 0.0;   // the same for q = 0.9
  int64_t count = 0;  // target values measured: windows x horizon steps
  TargetUnitFigures in_target_units;
};

// Each window's way back to the target's units: value = scaled * scale[b] + center[b].
struct WindowUnits {
  std::vector<double> scale, center;  // one per window of a batch
};

// Accumulates ForecastMetrics over batches of any size. Sums are kept in double on the
// CPU and visited in a fixed order, so feeding the batches one by one gives exactly the
// figures of one batch holding all of them.
// The position of level q among the quantile levels (matched within 1e-9: they arrive as
// parsed decimals), or -1 when absent.
int64_t quantile_index(const std::vector<double>& quantiles, double q);

class MetricsAccumulator {
 public:
  explicit MetricsAccumulator(std::vector<double> quantiles);  // throws on a bad quantile list

  // forecast: [B, H, Q] with Q = quantiles.size(); target: [B, H]; any device and floating dtype.
  void add(const at::Tensor& forecast, const at::Tensor& target);
  // The same, and the figures in the target's units with one scale and center per window.
  void add(const at::Tensor& forecast, const at::Tensor& target, const WindowUnits& units);
  ForecastMetrics result() const;
  const std::vector<double>& quantiles() const { return quantiles_; }

 private:
  struct Sums {
    double pinball = 0.0;         // over every value and quantile
    double median_pinball = 0.0;  // pinball_0.5 only
    double q90_pinball = 0.0;
    double squared_error = 0.0;  // of the median forecast
    double abs_error = 0.0;
    double abs_target = 0.0;
  };
  void check_shapes(const at::Tensor& forecast, const at::Tensor& target) const;
  void accumulate(const double* forecast, const double* target, int64_t values, Sums& sums) const;
  TargetUnitFigures figures(const Sums& sums, int64_t count) const;

  std::vector<double> quantiles_;
  int64_t median_ = -1;  // index of 0.5 in quantiles_, -1 when absent
  int64_t q90_ = -1;
  int64_t count_ = 0;
  Sums scaled_;
  int64_t units_count_ = 0;  // values also added in the target's units
  Sums units_;
};

// Keys loss, rmse, mae, p50, p90, count and, when measured, in_target_units (the five
// figures); NaN and infinite figures (p50 and p90 when every target is 0) become null, as
// JSON has no such numbers.
nlohmann::json to_json(const ForecastMetrics& metrics);
nlohmann::json to_json(const TargetUnitFigures& figures);
// What to_json wrote: NaN for a null or absent key.
TargetUnitFigures target_unit_figures_from_json(const nlohmann::json& j);

}  // namespace qtft::eval
