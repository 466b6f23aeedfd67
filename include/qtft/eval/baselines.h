#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "qtft/data/features/dataset.h"
#include "qtft/eval/metrics.h"

namespace qtft::eval {

// Quantiles of `values` by linear interpolation between order statistics, numpy's default
// ("linear", type 7 of Hyndman and Fan): with the values sorted as x[0] <= ... <= x[n-1]
// and h = (n - 1) * q, the q quantile is x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)]).
// Throws qtft::Error when `values` is empty or a quantile is outside (0, 1).
std::vector<double> empirical_quantiles(std::span<const double> values, const std::vector<double>& quantiles);

// The quantiles above of the scaled target over the training split: rows
// [split_bounds[0], split_bounds[1]) of every series' SeriesFeatures::target, pooled.
std::vector<double> empirical_target_quantiles(const data::Dataset& dataset, const std::vector<double>& quantiles);

// Two forecasts that learn nothing from the inputs, scored like the model, so a trained
// model's metrics can be read against them:
// - zero: every quantile forecasts a zero return (the random-walk price forecast);
// - empirical: each quantile forecasts, for every window and step, the training split's
//   empirical quantile of the target (the unconditional distribution).
struct BaselineMetrics {
  ForecastMetrics zero;
  ForecastMetrics empirical;
  std::vector<double> empirical_values;  // the constant forecast per quantile
  // The baseline with the lower loss; zero on a tie (it is the simpler one).
  const ForecastMetrics& best() const;
  std::string best_name() const;  // "zero" or "empirical"
};

// Scores both baselines on the windows of `split`, in order, `batch_size` windows at a time
// through data::make_batch, exactly as an evaluation of the model would see them.
// {"zero": metrics, "empirical": metrics}, as metrics files hold them.
nlohmann::json to_json(const BaselineMetrics& baselines);

BaselineMetrics evaluate_baselines(const data::Dataset& dataset, data::Split split,
                                   const std::vector<double>& quantiles, size_t batch_size = 1024);

}  // namespace qtft::eval
