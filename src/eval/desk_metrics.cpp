#include "qtft/eval/desk_metrics.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "qtft/common/error.h"
#include "qtft/eval/metrics.h"

namespace qtft::eval {
namespace {

// One window's figures, viewed in the accumulator's flat arrays.
struct Window {
  int64_t series, time_ns;
  const double* median;    // H
  const double* realized;  // H
};

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kSecondsPerYear = 365.25 * 86400.0;

// Ranks from 1, ties given the mean of the ranks they span.
std::vector<double> ranks_of(std::span<const double> x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) ranks[order[k]] = mean_rank;
    i = j + 1;
  }
  return ranks;
}

double mean_of(std::span<const double> x) {
  return x.empty() ? kNaN : std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

// Sample standard deviation (n - 1).
double sd_of(std::span<const double> x) {
  if (x.size() < 2) return kNaN;
  const double m = mean_of(x);
  double sum = 0.0;
  for (double v : x) sum += (v - m) * (v - m);
  return std::sqrt(sum / static_cast<double>(x.size() - 1));
}

InformationCoefficient correlation_with_t(std::span<const double> x, std::span<const double> y) {
  InformationCoefficient ic;
  ic.count = static_cast<int64_t>(x.size());
  ic.ic = rank_correlation(x, y);
  ic.t = ic.count < 3 ? kNaN : ic.ic * std::sqrt(static_cast<double>(ic.count - 2) / (1.0 - ic.ic * ic.ic));
  return ic;
}

}  // namespace

double rank_correlation(std::span<const double> x, std::span<const double> y) {
  TORCH_CHECK(x.size() == y.size(), "rank_correlation: ", x.size(), " values against ", y.size());
  if (x.size() < 2) return kNaN;
  const std::vector<double> rx = ranks_of(x), ry = ranks_of(y);
  const double mx = mean_of(rx), my = mean_of(ry);
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mx) * (ry[i] - my);
    sxx += (rx[i] - mx) * (rx[i] - mx);
    syy += (ry[i] - my) * (ry[i] - my);
  }
  if (sxx == 0.0 || syy == 0.0) return kNaN;
  return sxy / std::sqrt(sxx * syy);
}

DeskMetricsAccumulator::DeskMetricsAccumulator(std::vector<double> quantiles, double cost_bps)
    : quantiles_(std::move(quantiles)), cost_bps_(cost_bps) {
  if (!(cost_bps_ >= 0.0) || !std::isfinite(cost_bps_)) {
    throw UsageError("--cost-bps must be a non-negative number of basis points, got " + std::to_string(cost_bps_));
  }
  median_ = quantile_index(quantiles_, 0.5);
  if (median_ < 0) throw UsageError("desk metrics: the quantiles must include 0.5 (the median forecast)");
  lowest_ = static_cast<size_t>(std::min_element(quantiles_.begin(), quantiles_.end()) - quantiles_.begin());
  highest_ = static_cast<size_t>(std::max_element(quantiles_.begin(), quantiles_.end()) - quantiles_.begin());
  below_.assign(quantiles_.size(), 0);
}

void DeskMetricsAccumulator::add(const at::Tensor& forecast, const at::Tensor& realized,
                                 std::span<const int64_t> series, std::span<const int64_t> first_bar_ns) {
  const auto q = static_cast<int64_t>(quantiles_.size());
  TORCH_CHECK(forecast.dim() == 3 && forecast.size(2) == q && realized.dim() == 2 &&
                  realized.size(0) == forecast.size(0) && realized.size(1) == forecast.size(1) &&
                  static_cast<int64_t>(series.size()) == forecast.size(0) && series.size() == first_bar_ns.size(),
              "desk metrics: expected forecast [B, H, ", q, "], realized [B, H] and B series and times, got ",
              forecast.sizes(), ", ", realized.sizes(), ", ", series.size(), " and ", first_bar_ns.size());
  const int64_t b = forecast.size(0), h = forecast.size(1);
  if (horizon_ < 0) horizon_ = h;
  TORCH_CHECK(h == horizon_, "desk metrics: horizon ", h, " after ", horizon_);
  const at::Tensor f = forecast.detach().to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor r = realized.detach().to(at::kCPU, at::kDouble).contiguous();
  const double* fp = f.data_ptr<double>();
  const double* rp = r.data_ptr<double>();
  series_.insert(series_.end(), series.begin(), series.end());
  time_ns_.insert(time_ns_.end(), first_bar_ns.begin(), first_bar_ns.end());
  realized_.insert(realized_.end(), rp, rp + b * h);
  // Calibration and the sign's hits are counts, taken here; of the forecasts only the
  // medians are kept for the rank correlations and the position.
  const auto nq = static_cast<size_t>(q);
  for (int64_t v = 0; v < b * h; ++v) {
    const double y = rp[v];
    const double* fv = fp + v * q;
    for (size_t k = 0; k < nq; ++k) below_[k] += y <= fv[k] ? 1 : 0;
    inside_ += (y >= fv[lowest_] && y <= fv[highest_]) ? 1 : 0;
    ++values_;
    const double median = fv[median_];
    median_values_.push_back(median);
    if (y != 0.0 && median != 0.0) {
      ++signed_values_;
      hits_ += (y > 0.0) == (median > 0.0) ? 1 : 0;
    }
  }
}

DeskMetrics DeskMetricsAccumulator::result() const {
  DeskMetrics m;
  m.quantiles = quantiles_;
  m.cost_bps = cost_bps_;
  m.windows = static_cast<int64_t>(series_.size());
  const auto nq = quantiles_.size();
  const int64_t h = std::max<int64_t>(horizon_, 0);
  // The windows in a fixed order (series, time), whatever order they came in.
  std::vector<Window> windows(series_.size());
  for (size_t k = 0; k < windows.size(); ++k) {
    windows[k] = {series_[k], time_ns_[k], median_values_.data() + k * static_cast<size_t>(h),
                  realized_.data() + k * static_cast<size_t>(h)};
  }
  std::vector<const Window*> order;
  for (const Window& w : windows) order.push_back(&w);
  std::stable_sort(order.begin(), order.end(), [](const Window* a, const Window* b) {
    return std::tie(a->series, a->time_ns) < std::tie(b->series, b->time_ns);
  });

  // Calibration: each quantile's share at or below, the outer quantiles' interval.
  for (size_t k = 0; k < nq; ++k) {
    m.coverage.push_back(values_ ? static_cast<double>(below_[k]) / static_cast<double>(values_) : kNaN);
  }
  m.interval_coverage = values_ ? static_cast<double>(inside_) / static_cast<double>(values_) : kNaN;
  m.interval_nominal = quantiles_[highest_] - quantiles_[lowest_];
  m.hit_rate = signed_values_ ? static_cast<double>(hits_) / static_cast<double>(signed_values_) : kNaN;

  // Information coefficients per horizon step: pooled, per series, and per bar across series.
  auto median_at = [](const Window* w, int64_t s) { return w->median[s]; };
  // Step s's median forecasts and outcomes of `windows`.
  auto pairs = [&](const std::vector<const Window*>& windows, int64_t s) {
    std::pair<std::vector<double>, std::vector<double>> xy;
    for (const Window* w : windows) {
      xy.first.push_back(median_at(w, s));
      xy.second.push_back(w->realized[s]);
    }
    return xy;
  };
  std::map<int64_t, std::vector<const Window*>> by_series, by_time;
  for (const Window* w : order) {
    by_series[w->series].push_back(w);
    by_time[w->time_ns].push_back(w);
  }
  for (const auto& [series, _] : by_series) m.series.push_back(series);
  m.ic_per_series.resize(by_series.size());
  for (int64_t s = 0; s < h; ++s) {
    const auto [x, y] = pairs(order, s);
    m.ic_pooled.push_back(correlation_with_t(x, y));
    size_t k = 0;
    for (const auto& [_, windows] : by_series) {
      const auto [xs, ys] = pairs(windows, s);
      m.ic_per_series[k++].push_back(correlation_with_t(xs, ys));
    }
    std::vector<double> per_bar;
    for (const auto& [_, windows] : by_time) {
      if (windows.size() < 3) continue;
      const auto [xs, ys] = pairs(windows, s);
      const double ic = rank_correlation(xs, ys);
      if (std::isfinite(ic)) per_bar.push_back(ic);
    }
    InformationCoefficient across{mean_of(per_bar), kNaN, static_cast<int64_t>(per_bar.size())};
    if (per_bar.size() >= 2) across.t = across.ic / (sd_of(per_bar) / std::sqrt(static_cast<double>(per_bar.size())));
    m.ic_across_series.push_back(across);
  }

  // The forecast-sized position on the first step.
  std::vector<double> first_medians;
  for (const Window* w : order) first_medians.push_back(median_at(w, 0));
  const double size_scale = sd_of(first_medians);
  std::map<int64_t, std::vector<double>> returns_by_time;
  std::vector<double> changes, spacings_s;
  if (h > 0 && std::isfinite(size_scale) && size_scale > 0.0) {
    for (const auto& [_, windows] : by_series) {
      double previous = 0.0;
      for (size_t i = 0; i < windows.size(); ++i) {
        const Window* w = windows[i];
        const double position = std::clamp(median_at(w, 0) / size_scale, -1.0, 1.0);
        const double change = std::fabs(position - previous);
        returns_by_time[w->time_ns].push_back(position * w->realized[0] - cost_bps_ / 1e4 * change);
        changes.push_back(change);
        if (i > 0) spacings_s.push_back(static_cast<double>(w->time_ns - windows[i - 1]->time_ns) / 1e9);
        previous = position;
      }
    }
  }
  std::vector<double> portfolio;
  for (const auto& [_, returns] : returns_by_time) portfolio.push_back(mean_of(returns));
  PositionFigures& p = m.position;
  p.bars = static_cast<int64_t>(portfolio.size());
  p.mean_return = mean_of(portfolio);
  p.turnover = mean_of(changes);
  if (!spacings_s.empty()) {
    std::nth_element(spacings_s.begin(), spacings_s.begin() + static_cast<std::ptrdiff_t>(spacings_s.size() / 2),
                     spacings_s.end());
    const double spacing = spacings_s[spacings_s.size() / 2];
    p.bars_per_year = spacing > 0.0 ? kSecondsPerYear / spacing : kNaN;
  } else {
    p.bars_per_year = kNaN;
  }
  const double sd = sd_of(portfolio);
  p.sharpe = sd > 0.0 ? p.mean_return / sd * std::sqrt(p.bars_per_year) : kNaN;
  double cumulative = 0.0, peak = 0.0;
  p.max_drawdown = portfolio.empty() ? kNaN : 0.0;
  for (double r : portfolio) {
    cumulative += r;
    peak = std::max(peak, cumulative);
    p.max_drawdown = std::max(p.max_drawdown, peak - cumulative);
  }
  return m;
}

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json to_json(const InformationCoefficient& ic) {
  return {{"ic", number(ic.ic)}, {"t", number(ic.t)}, {"count", ic.count}};
}

nlohmann::json to_json(const std::vector<InformationCoefficient>& per_step) {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& ic : per_step) steps.push_back(to_json(ic));
  return steps;
}

}  // namespace

std::string format_desk_metrics(const DeskMetrics& d, const std::string& indent) {
  std::string out = indent + "coverage:";
  char buf[256];
  for (size_t k = 0; k < d.quantiles.size(); ++k) {
    std::snprintf(buf, sizeof buf, " q%g %.3f", d.quantiles[k], d.coverage[k]);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "; central interval %.3f (nominal: %.3f)\n", d.interval_coverage, d.interval_nominal);
  out += buf + indent + "information coefficient per horizon step, pooled (t):";
  for (const auto& ic : d.ic_pooled) {
    std::snprintf(buf, sizeof buf, " %.4f (%.1f)", ic.ic, ic.t);
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "\n%ssign hit rate %.4f\n", indent.c_str(), d.hit_rate);
  out += buf;
  const auto& p = d.position;
  std::snprintf(buf, sizeof buf,
                "%sposition sized by the first step's median, %g bps a unit traded: mean %.3g per bar, Sharpe %.2f "
                "(%.0f bars a year), turnover %.3f, max drawdown %.3g, %lld bars\n",
                indent.c_str(), d.cost_bps, p.mean_return, p.sharpe, p.bars_per_year, p.turnover, p.max_drawdown,
                static_cast<long long>(p.bars));
  return out + buf;
}

std::string summarize_desk_metrics(const DeskMetrics& d) {
  const auto ic = d.ic_pooled.empty() ? InformationCoefficient{std::nan(""), std::nan(""), 0} : d.ic_pooled.front();
  char buf[256];
  std::snprintf(buf, sizeof buf, "interval coverage %.3f (nominal %.3f), IC %.4f (t %.1f), hit rate %.3f, Sharpe %.2f",
                d.interval_coverage, d.interval_nominal, ic.ic, ic.t, d.hit_rate, d.position.sharpe);
  return buf;
}

nlohmann::json to_json(const DeskMetrics& m, const std::vector<std::string>& series_names) {
  nlohmann::json coverage = nlohmann::json::object();
  for (size_t k = 0; k < m.quantiles.size(); ++k) {
    char level[32];
    std::snprintf(level, sizeof level, "%g", m.quantiles[k]);
    coverage[level] = number(m.coverage[k]);
  }
  nlohmann::json per_series = nlohmann::json::object();
  for (size_t k = 0; k < m.series.size(); ++k) {
    const auto id = static_cast<size_t>(m.series[k]);
    per_series[id < series_names.size() ? series_names[id] : std::to_string(id)] = to_json(m.ic_per_series[k]);
  }
  return {{"windows", m.windows},
          {"coverage", coverage},
          {"interval_coverage", number(m.interval_coverage)},
          {"interval_nominal", number(m.interval_nominal)},
          {"ic_pooled", to_json(m.ic_pooled)},
          {"ic_across_series", to_json(m.ic_across_series)},
          {"ic_per_series", per_series},
          {"hit_rate", number(m.hit_rate)},
          {"position",
           {{"cost_bps", m.cost_bps},
            {"mean_return", number(m.position.mean_return)},
            {"sharpe", number(m.position.sharpe)},
            {"turnover", number(m.position.turnover)},
            {"max_drawdown", number(m.position.max_drawdown)},
            {"bars_per_year", number(m.position.bars_per_year)},
            {"bars", m.position.bars}}}};
}

}  // namespace qtft::eval
