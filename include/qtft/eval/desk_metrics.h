#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

namespace qtft::eval {

// What a trading desk asks of quantile forecasts before it trusts them (issue 36): are the
// quantiles calibrated, does the median rank what happens next, and what would a position
// sized by it have earned after costs. All in the target's units (a one-bar log return by
// default, so that the position's figures are returns). A figure with nothing to measure is
// NaN.

// A rank correlation (Spearman's: Pearson's on ranks, ties given their mean rank) and its
// t-statistic, over `count` pairs. Pooled and per series: t = ic sqrt((n - 2) / (1 - ic^2)),
// NaN below 3 pairs. Across series per bar: the mean of each bar's correlation (bars with at
// least 3 series) and t = mean / (sd / sqrt(bars)), `count` the bars.
struct InformationCoefficient {
  double ic = 0.0;
  double t = 0.0;
  int64_t count = 0;
};

// A position in each series sized by its first-step median forecast, m / s capped to
// [-1, 1], with s the standard deviation of those medians over every window; each bar it
// earns position x the realized first-step value, less cost_bps / 1e4 x |change of position|.
// The portfolio's return per bar is the mean over the series forecast at that bar.
struct PositionFigures {
  double mean_return = 0.0;   // per bar
  double sharpe = 0.0;        // annualized: sqrt(bars per year), from the median bar spacing
  double turnover = 0.0;      // mean |change of position| per series and bar
  double max_drawdown = 0.0;  // largest fall of the cumulative return from a previous peak (>= 0)
  double bars_per_year = 0.0;
  int64_t bars = 0;
};

struct DeskMetrics {
  std::vector<double> quantiles;
  // Per quantile: the share of realized values at or below its forecast (calibrated: q).
  std::vector<double> coverage;
  // The share between the lowest and the highest quantile forecast (inclusive), and the
  // share a calibrated forecast would give (highest - lowest level).
  double interval_coverage = 0.0, interval_nominal = 0.0;
  // Per horizon step, of the median forecast against the realized value.
  std::vector<InformationCoefficient> ic_pooled;
  std::vector<InformationCoefficient> ic_across_series;
  // [series][step], series in the order of their ids, only those with windows.
  std::vector<int64_t> series;
  std::vector<std::vector<InformationCoefficient>> ic_per_series;
  // The share of values whose median forecast has the sign of the realized value (values
  // where either is exactly 0 are not counted).
  double hit_rate = 0.0;
  PositionFigures position;
  double cost_bps = 0.0;
  int64_t windows = 0;
};

// Spearman's rank correlation of x and y (same length), NaN when either is constant or
// fewer than 2 pairs.
double rank_correlation(std::span<const double> x, std::span<const double> y);

// Collects windows in any order and batching; the result does not depend on either.
class DeskMetricsAccumulator {
 public:
  // Throws qtft::UsageError for a negative or non-finite cost, and on a quantile list
  // without 0.5.
  DeskMetricsAccumulator(std::vector<double> quantiles, double cost_bps);

  // forecast [B, H, Q] and realized [B, H], in the target's units; per window its series
  // and the time of its first forecast bar (ns).
  void add(const at::Tensor& forecast, const at::Tensor& realized, std::span<const int64_t> series,
           std::span<const int64_t> first_bar_ns);
  DeskMetrics result() const;

 private:
  std::vector<double> quantiles_;
  double cost_bps_;
  int64_t median_ = -1;
  int64_t horizon_ = -1;
  // Per window, in the order added, in flat arrays: a pair of small vectors per window,
  // interleaved with each batch's large temporaries, fragmented the heap until it grew by
  // megabytes a batch (11 GiB over a million windows).
  std::vector<int64_t> series_, time_ns_;
  std::vector<double> median_values_;  // per window H
  std::vector<double> realized_;       // per window H
  // Counted as windows come (exact integers, in any order): per quantile the values at or
  // below it, the values inside the outer quantiles, and the sign's hits.
  size_t lowest_ = 0, highest_ = 0;
  std::vector<int64_t> below_;
  int64_t inside_ = 0, values_ = 0, hits_ = 0, signed_values_ = 0;
};

// The figures as lines for a terminal, each starting with `indent`: coverage, IC per step,
// hit rate, the position's returns.
std::string format_desk_metrics(const DeskMetrics& metrics, const std::string& indent);
// The same in one line: central interval coverage, first step's IC, hit rate, Sharpe.
std::string summarize_desk_metrics(const DeskMetrics& metrics);

// Per-series figures keyed by series_names[id] when given, else by the id.
nlohmann::json to_json(const DeskMetrics& metrics, const std::vector<std::string>& series_names = {});

}  // namespace qtft::eval
