#include "qtft/eval/baselines.h"

#include <nlohmann/json.hpp>

#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "qtft/common/error.h"
#include "qtft/data/batch.h"
#include "qtft/eval/quantile_loss.h"

namespace qtft::eval {

std::vector<double> empirical_quantiles(std::span<const double> values, const std::vector<double>& quantiles) {
  check_quantiles(quantiles);
  if (values.empty()) throw Error("empirical quantiles: no values to take quantiles of");
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> out;
  out.reserve(quantiles.size());
  const auto last = static_cast<double>(sorted.size() - 1);
  for (double q : quantiles) {
    const double h = last * q;
    const auto lo = static_cast<size_t>(std::floor(h));
    const size_t hi = std::min(lo + 1, sorted.size() - 1);
    out.push_back(sorted[lo] + (h - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]));
  }
  return out;
}

std::vector<double> empirical_target_quantiles(const data::Dataset& dataset, const std::vector<double>& quantiles) {
  std::vector<double> values;
  for (const auto& s : dataset.series()) {
    for (int64_t r = s.split_bounds[0]; r < s.split_bounds[1]; ++r) values.push_back(s.target[static_cast<size_t>(r)]);
  }
  if (values.empty()) throw Error(dataset.source() + ": the training split has no rows to take target quantiles of");
  return empirical_quantiles(values, quantiles);
}

const ForecastMetrics& BaselineMetrics::best() const { return empirical.loss < zero.loss ? empirical : zero; }

std::string BaselineMetrics::best_name() const { return &best() == &empirical ? "empirical" : "zero"; }

BaselineMetrics evaluate_baselines(const data::Dataset& dataset, data::Split split,
                                   const std::vector<double>& quantiles, size_t batch_size) {
  if (batch_size == 0) throw UsageError("baselines: batch size must be at least 1, got 0");
  BaselineMetrics out;
  out.empirical_values = empirical_target_quantiles(dataset, quantiles);
  MetricsAccumulator zero(quantiles), empirical(quantiles);

  const auto horizon = dataset.options().horizon;
  const auto n_q = static_cast<int64_t>(quantiles.size());
  const auto constant = at::tensor(out.empirical_values, at::TensorOptions().dtype(at::kDouble));
  const size_t windows = dataset.num_windows(split);
  std::vector<size_t> indices;
  for (size_t begin = 0; begin < windows; begin += batch_size) {
    indices.resize(std::min(batch_size, windows - begin));
    std::iota(indices.begin(), indices.end(), begin);
    auto batch = data::make_batch(dataset, split, indices);
    const int64_t b = batch.size();
    zero.add(at::zeros({b, horizon, n_q}, at::kDouble), batch.target);
    empirical.add(constant.expand({b, horizon, n_q}), batch.target);
  }
  out.zero = zero.result();
  out.empirical = empirical.result();
  return out;
}

nlohmann::json to_json(const BaselineMetrics& baselines) {
  return {{"zero", to_json(baselines.zero)}, {"empirical", to_json(baselines.empirical)}};
}

}  // namespace qtft::eval
