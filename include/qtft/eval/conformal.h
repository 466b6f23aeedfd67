#pragma once

// Conformal quantiles: offsets added to a model's quantiles so that each covers what it
// promises. Plain arithmetic over forecasts in the model's scaled units, laid out as the
// model gives them, [windows, horizon, quantiles] row-major.
//
// Split (conformalized quantile regression, Romano et al. 2019, one level at a time): on a
// calibration split, the offset of level q at step h is the ceil((n + 1) q)-th smallest of
// the n residuals y - f_q (the largest when that rank passes n), so that f_q + offset lies at
// or above a share q of the calibration outcomes (ceil((n + 1) q) / n of them; 1 when the rank
// was clamped).
//
// Adaptive (quantile tracking, the online form of adaptive conformal inference, Gibbs and
// Candes 2021; Angelopoulos et al. 2023): each offset moves after every realized outcome,
//   offset += rate * (q - 1{y <= f_q + offset}),
// up after a miss, down after a hit, so that over any stretch of outcomes the share covered
// tends to q whatever the shift. One offset per series, step and level; the outcome of step
// h of a forecast made at bar t is known at bar t + h only, and AdaptiveConformal takes it
// then (no look-ahead), scored against the quantile issued at t.
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <vector>

namespace qtft::eval {

// One offset per horizon step and quantile level, [horizon, levels] row-major.
struct ConformalOffsets {
  std::vector<double> levels;
  int64_t horizon = 0;
  std::vector<double> offsets;
  double at(int64_t step, int64_t level) const {
    return offsets[static_cast<size_t>(step * static_cast<int64_t>(levels.size()) + level)];
  }
};

// Coverage of quantiles over outcomes, in the model's scaled units.
struct QuantileCoverage {
  std::vector<double> below;          // per level: the share of outcomes at or below that quantile
  double interval = 0.0;              // the share inside [lowest level, highest level]
  double loss = 0.0;                  // mean pinball loss, scaled units
  double loss_in_target_units = 0.0;  // the same with each outcome's scale (CoverageTally::add)
  int64_t outcomes = 0;
};

// Counts outcomes against their quantiles one at a time.
class CoverageTally {
 public:
  explicit CoverageTally(std::vector<double> levels);
  // One outcome and its quantiles (one per level, in the levels' order); `scale` turns the
  // model's units into the target's for loss_in_target_units.
  void add(std::span<const double> quantiles, double outcome, double scale = 1.0);
  // NaN shares and losses without an outcome.
  QuantileCoverage result() const;

 private:
  std::vector<double> levels_, below_;
  double inside_ = 0.0, loss_ = 0.0, loss_target_ = 0.0;
  int64_t outcomes_ = 0;
};
// {"coverage": per level, "interval_coverage", "loss", "outcomes"}, with
// "loss_in_target_units" where the tally was given each outcome's scale.
nlohmann::json to_json(const QuantileCoverage& coverage, bool with_target_units);

// Split conformal offsets from a calibration split's forecasts [windows, horizon, levels]
// and outcomes [windows, horizon]. Throws qtft::Error when there are no windows, the sizes
// disagree, or a level lies outside (0, 1).
ConformalOffsets fit_split_conformal(std::span<const double> forecasts, std::span<const double> outcomes,
                                     int64_t horizon, const std::vector<double>& levels);

// Each row of `forecasts` ([rows, levels], the levels in increasing order) sorted
// increasingly, so that no two quantiles cross once their offsets moved them.
void sort_quantiles(std::span<double> forecasts, int64_t levels);

// forecasts [windows, horizon, levels] plus their offsets, then sorted (sort_quantiles).
void apply_offsets(const ConformalOffsets& offsets, std::span<double> forecasts);

// The rate `--conformal adaptive` moves offsets by unless told, in scaled units (whose spread
// is about 1). Of 0.05, 0.1, 0.2 and 0.4 on BACKTEST.md's regime walk, 0.2 was the lowest to
// bring every fold after the shift within 3 points of the nominal coverage; higher rates
// cost loss before the shift (docs/results/backtest_conformal.json).
inline constexpr double kDefaultConformalRate = 0.2;

// Quantile tracking for many series, fed bar by bar.
class AdaptiveConformal {
 public:
  // Throws qtft::Error for a rate outside (0, 1] or a level outside (0, 1).
  AdaptiveConformal(std::vector<double> levels, int64_t horizon, double rate);

  // The offsets now in force for `series` ([horizon, levels]; zeros for a series not seen).
  ConformalOffsets offsets_for(int64_t series) const;

  // A forecast of `series` made after bar `bar` (its quantiles as the model gave them,
  // [horizon, levels], before any offset), its step h landing on bar `bar` + h: kept, with
  // the offsets in force now, until its outcomes arrive; each outcome is scored against the
  // quantile issued then. Returns the quantiles issued: the model's plus those offsets.
  std::vector<double> forecast_made(int64_t series, int64_t bar, std::span<const double> quantiles);
  // The same with the bars its steps land on named (`landing`, one per step, increasing):
  // any increasing key of a series' bars, such as their timestamps.
  std::vector<double> forecast_made(int64_t series, std::span<const int64_t> landing,
                                    std::span<const double> quantiles);

  // The outcome of bar `bar` of `series` (the target that bar realized): every pending
  // forecast of the series with a step landing on this bar takes it, in the order they were
  // made; the offset of that step and each level moves. Bars of one series must come in
  // increasing order (qtft::Error otherwise).
  void outcome(int64_t series, int64_t bar, double value);

  // The whole state (offsets, pending forecasts, last outcomes), so that a walk stopped
  // between two forecasts goes on exactly; from_json throws qtft::Error naming the field.
  nlohmann::json to_json() const;
  static AdaptiveConformal from_json(const nlohmann::json& state);

  // The last bar of `series` whose outcome was taken (none yet: the lowest int64_t).
  int64_t last_outcome(int64_t series) const;
  // Puts `series` where saved offsets left it: these offsets ([horizon, levels]), its outcomes
  // through bar `last_outcome` taken, none pending. Throws qtft::Error for offsets of another size.
  void resume_series(int64_t series, std::vector<double> offsets, int64_t last_outcome);

  int64_t horizon() const { return horizon_; }
  const std::vector<double>& levels() const { return levels_; }
  double rate() const { return rate_; }

 private:
  struct Pending {
    std::vector<int64_t> landing;  // the bar each step lands on
    std::vector<double> issued;    // [horizon, levels]: the model's quantiles plus the offsets then
  };
  struct Series {
    std::vector<double> offsets;  // [horizon, levels]
    std::deque<Pending> pending;  // in the order made
    int64_t last_outcome_bar = std::numeric_limits<int64_t>::min();
  };
  Series& series(int64_t id);

  std::vector<double> levels_;
  int64_t horizon_;
  double rate_;
  std::map<int64_t, Series> series_;
};

}  // namespace qtft::eval
