#include "qtft/eval/baselines.h"

#include <nlohmann/json.hpp>

#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "qtft/common/error.h"
#include "qtft/data/features/batch.h"
#include "qtft/eval/quantile_loss.h"
#include "qtft/eval/window_units.h"

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

namespace {

// Floats as unsigned integers in the same order (negatives reversed below the positives),
// so that an order statistic can be found digit by digit.
uint32_t sortable_bits(float value) {
  uint32_t u = 0;
  std::memcpy(&u, &value, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

float from_sortable_bits(uint32_t u) {
  u = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
  float value = 0;
  std::memcpy(&value, &u, sizeof value);
  return value;
}

// Reads the targets in blocks through the dataset, so that a mapped store's pages stay in
// the page cache rather than joining the process's resident set.
template <class F>
void for_each_training_target(const data::Dataset& dataset, F&& f) {
  constexpr size_t kBlock = 1 << 16;
  std::vector<float> block(kBlock);
  for (const auto& s : dataset.series()) {
    const auto train = s.target.subspan(static_cast<size_t>(s.split_bounds[0]),
                                        static_cast<size_t>(s.split_bounds[1] - s.split_bounds[0]));
    for (size_t first = 0; first < train.size(); first += kBlock) {
      const auto part = train.subspan(first, std::min(kBlock, train.size() - first));
      dataset.copy(part, block.data());
      for (size_t i = 0; i < part.size(); ++i) f(block[i]);
    }
  }
}

// The k-th smallest training targets (0-based, for every k of `ranks`), exactly, in two
// passes of radix selection over the dataset's own arrays: the high 16 bits first, then
// the low 16 bits inside the buckets that hold a wanted rank. A sort would copy every
// target, which for a feature store of a billion rows is what must not happen.
std::vector<float> training_order_statistics(const data::Dataset& dataset, const std::vector<size_t>& ranks) {
  constexpr size_t kBuckets = 1 << 16;
  std::vector<uint64_t> high(kBuckets, 0);
  for_each_training_target(dataset, [&](float v) { ++high[sortable_bits(v) >> 16]; });
  struct Wanted {
    uint32_t bucket;
    uint64_t rank_in_bucket;
  };
  std::vector<Wanted> wanted;
  std::map<uint32_t, std::vector<uint64_t>> low;  // a histogram per bucket that holds a rank
  for (size_t k : ranks) {
    uint64_t below = 0;
    uint32_t b = 0;
    while (below + high[b] <= k) below += high[b++];
    wanted.push_back({b, k - below});
    low.try_emplace(b, kBuckets, 0);
  }
  for_each_training_target(dataset, [&](float v) {
    const uint32_t u = sortable_bits(v);
    if (auto it = low.find(u >> 16); it != low.end()) ++it->second[u & 0xffffu];
  });
  std::vector<float> out;
  for (const auto& w : wanted) {
    const auto& counts = low.at(w.bucket);
    uint64_t below = 0;
    uint32_t l = 0;
    while (below + counts[l] <= w.rank_in_bucket) below += counts[l++];
    out.push_back(from_sortable_bits((w.bucket << 16) | l));
  }
  return out;
}

}  // namespace

std::vector<double> empirical_target_quantiles(const data::Dataset& dataset, const std::vector<double>& quantiles) {
  check_quantiles(quantiles);
  size_t n = 0;
  for (const auto& s : dataset.series()) n += static_cast<size_t>(s.split_bounds[1] - s.split_bounds[0]);
  if (n == 0) throw Error(dataset.source() + ": the training split has no rows to take target quantiles of");
  // The same interpolation as empirical_quantiles, between the two order statistics around
  // each quantile's position.
  std::vector<size_t> ranks;
  const auto last = static_cast<double>(n - 1);
  for (double q : quantiles) {
    const auto lo = static_cast<size_t>(std::floor(last * q));
    ranks.push_back(lo);
    ranks.push_back(std::min(lo + 1, n - 1));
  }
  const auto values = training_order_statistics(dataset, ranks);
  std::vector<double> out;
  for (size_t i = 0; i < quantiles.size(); ++i) {
    const double h = last * quantiles[i];
    const double lo = values[2 * i], hi = values[2 * i + 1];
    out.push_back(lo + (h - std::floor(h)) * (hi - lo));
  }
  return out;
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
    const auto units = target_units_of(dataset, split, begin, indices.size());
    zero.add(at::zeros({b, horizon, n_q}, at::kDouble), batch.target, units);
    empirical.add(constant.expand({b, horizon, n_q}), batch.target, units);
  }
  out.zero = zero.result();
  out.empirical = empirical.result();
  return out;
}

nlohmann::json to_json(const BaselineMetrics& baselines) {
  return {{"zero", to_json(baselines.zero)}, {"empirical", to_json(baselines.empirical)}};
}

}  // namespace qtft::eval
