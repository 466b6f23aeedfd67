#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

namespace qtft::eval {

// Forecast quality over a set of windows. Every figure is in the scaled target units of
// docs/DATA.md (one-bar log return / training-split std), the units the model predicts.
// A figure with nothing to measure is NaN: all of them when count is 0; rmse, mae and p50
// when 0.5 is not among the quantiles; p90 when 0.9 is not.
struct ForecastMetrics {
  double loss = 0.0;  // mean pinball loss over windows, horizon steps and quantiles (= quantile_loss)
  double rmse = 0.0;  // of the median (0.5 quantile) forecast
  double mae = 0.0;   // of the median forecast
  double p50 = 0.0;   // TFT paper's normalized quantile loss: 2 * sum pinball_0.5 / sum |y|
  double p90 = 0.0;   // the same for q = 0.9
  int64_t count = 0;  // target values measured: windows x horizon steps
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
  ForecastMetrics result() const;
  const std::vector<double>& quantiles() const { return quantiles_; }

 private:
  std::vector<double> quantiles_;
  int64_t median_ = -1;  // index of 0.5 in quantiles_, -1 when absent
  int64_t q90_ = -1;
  int64_t count_ = 0;
  double pinball_sum_ = 0.0;         // over every value and quantile
  double median_pinball_sum_ = 0.0;  // pinball_0.5 only
  double q90_pinball_sum_ = 0.0;
  double squared_error_sum_ = 0.0;  // of the median forecast
  double abs_error_sum_ = 0.0;
  double abs_target_sum_ = 0.0;
};

// Keys loss, rmse, mae, p50, p90, count; NaN and infinite figures (p50 and p90 when every
// target is 0) become null, as JSON has no such numbers.
nlohmann::json to_json(const ForecastMetrics& metrics);

}  // namespace qtft::eval
