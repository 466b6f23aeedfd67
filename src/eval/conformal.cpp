#include "qtft/eval/conformal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "qtft/common/error.h"

namespace qtft::eval {
namespace {

void check_levels(const std::vector<double>& levels, const char* who) {
  if (levels.empty()) throw Error(std::string(who) + ": no quantile levels");
  for (size_t k = 0; k < levels.size(); ++k) {
    const double q = levels[k];
    if (!(q > 0.0 && q < 1.0)) {
      throw Error(std::string(who) + ": quantile level " + std::to_string(q) + " is outside (0, 1)");
    }
    // Sorting crossing quantiles gives the k-th smallest value to the k-th level.
    if (k > 0 && !(levels[k - 1] < q)) throw Error(std::string(who) + ": the quantile levels must increase");
  }
}

}  // namespace

CoverageTally::CoverageTally(std::vector<double> levels) : levels_(std::move(levels)), below_(levels_.size(), 0.0) {}

void CoverageTally::add(std::span<const double> quantiles, double outcome, double scale) {
  const size_t nq = levels_.size();
  double loss = 0.0;
  for (size_t k = 0; k < nq; ++k) {
    if (outcome <= quantiles[k]) below_[k] += 1.0;
    const double e = outcome - quantiles[k];
    loss += std::max(levels_[k] * e, (levels_[k] - 1.0) * e);
  }
  if (outcome >= quantiles[0] && outcome <= quantiles[nq - 1]) inside_ += 1.0;
  loss_ += loss;
  loss_target_ += loss * scale;
  ++outcomes_;
}

QuantileCoverage CoverageTally::result() const {
  const auto n = static_cast<double>(outcomes_);
  const auto per_level = n * static_cast<double>(levels_.size());
  QuantileCoverage c;
  c.below = below_;
  for (double& share : c.below) share /= n;
  c.interval = inside_ / n;
  c.loss = loss_ / per_level;
  c.loss_in_target_units = loss_target_ / per_level;
  c.outcomes = outcomes_;
  return c;
}

nlohmann::json to_json(const QuantileCoverage& c, bool with_target_units) {
  auto number = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json below = nlohmann::json::array();
  for (double share : c.below) below.push_back(number(share));
  nlohmann::json out = {{"coverage", below},
                        {"interval_coverage", number(c.interval)},
                        {"loss", number(c.loss)},
                        {"outcomes", c.outcomes}};
  if (with_target_units) out["loss_in_target_units"] = number(c.loss_in_target_units);
  return out;
}

ConformalOffsets fit_split_conformal(std::span<const double> forecasts, std::span<const double> outcomes,
                                     int64_t horizon, const std::vector<double>& levels) {
  check_levels(levels, "split conformal");
  const auto nq = static_cast<int64_t>(levels.size());
  if (horizon < 1 || outcomes.empty() || outcomes.size() % static_cast<size_t>(horizon) != 0) {
    throw Error("split conformal: " + std::to_string(outcomes.size()) + " outcomes do not make windows of horizon " +
                std::to_string(horizon));
  }
  const auto windows = static_cast<int64_t>(outcomes.size()) / horizon;
  if (static_cast<int64_t>(forecasts.size()) != windows * horizon * nq) {
    throw Error("split conformal: " + std::to_string(forecasts.size()) + " forecast values for " +
                std::to_string(windows) + " windows of " + std::to_string(horizon) + " steps and " +
                std::to_string(nq) + " levels");
  }
  ConformalOffsets fitted{levels, horizon, std::vector<double>(static_cast<size_t>(horizon * nq))};
  std::vector<double> residuals(static_cast<size_t>(windows));
  for (int64_t h = 0; h < horizon; ++h) {
    for (int64_t k = 0; k < nq; ++k) {
      for (int64_t w = 0; w < windows; ++w) {
        const auto i = static_cast<size_t>(w * horizon + h);
        residuals[static_cast<size_t>(w)] =
            outcomes[i] - forecasts[i * static_cast<size_t>(nq) + static_cast<size_t>(k)];
      }
      // The rank of the finite-sample quantile, 1-based, clamped to the residuals there are.
      const auto rank = std::min<int64_t>(
          windows, static_cast<int64_t>(std::ceil(static_cast<double>(windows + 1) * levels[static_cast<size_t>(k)])));
      const auto nth = residuals.begin() + (std::max<int64_t>(rank, 1) - 1);
      std::nth_element(residuals.begin(), nth, residuals.end());
      fitted.offsets[static_cast<size_t>(h * nq + k)] = *nth;
    }
  }
  return fitted;
}

void sort_quantiles(std::span<double> forecasts, int64_t levels) {
  for (size_t row = 0; row + static_cast<size_t>(levels) <= forecasts.size(); row += static_cast<size_t>(levels)) {
    std::sort(forecasts.begin() + static_cast<std::ptrdiff_t>(row),
              forecasts.begin() + static_cast<std::ptrdiff_t>(row + static_cast<size_t>(levels)));
  }
}

void apply_offsets(const ConformalOffsets& offsets, std::span<double> forecasts) {
  const auto per_window = static_cast<size_t>(offsets.horizon) * offsets.levels.size();
  if (per_window == 0 || forecasts.size() % per_window != 0) {
    throw Error("conformal offsets of " + std::to_string(offsets.horizon) + " steps and " +
                std::to_string(offsets.levels.size()) + " levels do not fit " + std::to_string(forecasts.size()) +
                " forecast values");
  }
  for (size_t i = 0; i < forecasts.size(); ++i) forecasts[i] += offsets.offsets[i % per_window];
  sort_quantiles(forecasts, static_cast<int64_t>(offsets.levels.size()));
}

AdaptiveConformal::AdaptiveConformal(std::vector<double> levels, int64_t horizon, double rate)
    : levels_(std::move(levels)), horizon_(horizon), rate_(rate) {
  check_levels(levels_, "adaptive conformal");
  if (horizon_ < 1) throw Error("adaptive conformal: horizon " + std::to_string(horizon_) + " is below 1");
  if (!(rate_ > 0.0 && rate_ <= 1.0)) {
    throw Error("adaptive conformal: the rate must lie in (0, 1], got " + std::to_string(rate_));
  }
}

AdaptiveConformal::Series& AdaptiveConformal::series(int64_t id) {
  auto [it, added] = series_.try_emplace(id);
  if (added) it->second.offsets.assign(static_cast<size_t>(horizon_) * levels_.size(), 0.0);
  return it->second;
}

ConformalOffsets AdaptiveConformal::offsets_for(int64_t id) const {
  const auto it = series_.find(id);
  ConformalOffsets out{levels_, horizon_, {}};
  out.offsets = it != series_.end() ? it->second.offsets
                                    : std::vector<double>(static_cast<size_t>(horizon_) * levels_.size(), 0.0);
  return out;
}

std::vector<double> AdaptiveConformal::forecast_made(int64_t id, int64_t bar, std::span<const double> quantiles) {
  std::vector<int64_t> landing(static_cast<size_t>(horizon_));
  for (int64_t h = 0; h < horizon_; ++h) landing[static_cast<size_t>(h)] = bar + 1 + h;
  return forecast_made(id, landing, quantiles);
}

std::vector<double> AdaptiveConformal::forecast_made(int64_t id, std::span<const int64_t> landing,
                                                     std::span<const double> quantiles) {
  if (quantiles.size() != static_cast<size_t>(horizon_) * levels_.size()) {
    throw Error("adaptive conformal: a forecast of " + std::to_string(quantiles.size()) + " values, expected " +
                std::to_string(horizon_) + " steps x " + std::to_string(levels_.size()) + " levels");
  }
  if (landing.size() != static_cast<size_t>(horizon_) || !std::is_sorted(landing.begin(), landing.end()) ||
      std::adjacent_find(landing.begin(), landing.end()) != landing.end()) {
    throw Error("adaptive conformal: a forecast needs " + std::to_string(horizon_) + " increasing landing bars");
  }
  // The quantiles as issued: the model's plus the offsets in force now. The outcomes are
  // scored against these, whatever the offsets become before they arrive.
  Series& s = series(id);
  std::vector<double> issued(quantiles.begin(), quantiles.end());
  for (size_t i = 0; i < issued.size(); ++i) issued[i] += s.offsets[i];
  s.pending.push_back({std::vector<int64_t>(landing.begin(), landing.end()), issued});
  return issued;
}

void AdaptiveConformal::outcome(int64_t id, int64_t bar, double value) {
  Series& s = series(id);
  if (bar <= s.last_outcome_bar) {
    throw Error("adaptive conformal: series " + std::to_string(id) + ": the outcome of bar " + std::to_string(bar) +
                " came after that of bar " + std::to_string(s.last_outcome_bar));
  }
  s.last_outcome_bar = bar;
  const auto nq = levels_.size();
  for (const Pending& p : s.pending) {
    const auto at = std::lower_bound(p.landing.begin(), p.landing.end(), bar);
    if (at == p.landing.end() || *at != bar) continue;
    const auto step = static_cast<size_t>(at - p.landing.begin());  // the forecast's step that lands on this bar
    for (size_t k = 0; k < nq; ++k) {
      double& offset = s.offsets[step * nq + k];
      const double covered = value <= p.issued[step * nq + k] ? 1.0 : 0.0;
      offset += rate_ * (levels_[k] - covered);
    }
  }
  // A forecast whose last step has arrived has nothing more to take.
  while (!s.pending.empty() && s.pending.front().landing.back() <= bar) s.pending.pop_front();
}

int64_t AdaptiveConformal::last_outcome(int64_t id) const {
  const auto it = series_.find(id);
  return it != series_.end() ? it->second.last_outcome_bar : std::numeric_limits<int64_t>::min();
}

void AdaptiveConformal::resume_series(int64_t id, std::vector<double> offsets, int64_t last_outcome) {
  const size_t width = static_cast<size_t>(horizon_) * levels_.size();
  if (offsets.size() != width) {
    throw Error("adaptive conformal: series " + std::to_string(id) + ": offsets of " + std::to_string(offsets.size()) +
                " values, expected " + std::to_string(width));
  }
  Series& s = series(id);
  s.offsets = std::move(offsets);
  s.last_outcome_bar = last_outcome;
  s.pending.clear();
}

nlohmann::json AdaptiveConformal::to_json() const {
  nlohmann::json series = nlohmann::json::array();
  for (const auto& [id, s] : series_) {
    nlohmann::json pending = nlohmann::json::array();
    for (const Pending& p : s.pending) pending.push_back({{"landing", p.landing}, {"issued", p.issued}});
    series.push_back({{"id", id},
                      {"offsets", s.offsets},
                      {"last_outcome", s.last_outcome_bar == std::numeric_limits<int64_t>::min()
                                           ? nlohmann::json(nullptr)
                                           : nlohmann::json(s.last_outcome_bar)},
                      {"pending", pending}});
  }
  return {{"levels", levels_}, {"horizon", horizon_}, {"rate", rate_}, {"series", series}};
}

AdaptiveConformal AdaptiveConformal::from_json(const nlohmann::json& state) {
  try {
    AdaptiveConformal tracker(state.at("levels").get<std::vector<double>>(), state.at("horizon").get<int64_t>(),
                              state.at("rate").get<double>());
    const size_t width = static_cast<size_t>(tracker.horizon_) * tracker.levels_.size();
    for (const auto& entry : state.at("series")) {
      Series& s = tracker.series(entry.at("id").get<int64_t>());
      s.offsets = entry.at("offsets").get<std::vector<double>>();
      if (s.offsets.size() != width)
        throw Error("offsets of " + std::to_string(s.offsets.size()) + " values, expected " + std::to_string(width));
      if (!entry.at("last_outcome").is_null()) s.last_outcome_bar = entry.at("last_outcome").get<int64_t>();
      for (const auto& p : entry.at("pending")) {
        Pending pending{p.at("landing").get<std::vector<int64_t>>(), p.at("issued").get<std::vector<double>>()};
        if (pending.landing.size() != static_cast<size_t>(tracker.horizon_) || pending.issued.size() != width) {
          throw Error("a pending forecast of " + std::to_string(pending.issued.size()) + " values");
        }
        s.pending.push_back(std::move(pending));
      }
    }
    return tracker;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("adaptive conformal state: ") + e.what());
  } catch (const Error& e) {
    throw Error(std::string("adaptive conformal state: ") + e.what());
  }
}

}  // namespace qtft::eval
