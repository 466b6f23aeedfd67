#include "qtft/eval/conformal_walk.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <utility>

#include "qtft/common/error.h"
#include "qtft/eval/window_units.h"

namespace qtft::eval {

AdaptiveConformalWalk::AdaptiveConformalWalk(std::vector<double> levels, int64_t horizon, double rate)
    : tracker_(levels, horizon, rate), raw_(levels), conformal_(levels) {}

int64_t AdaptiveConformalWalk::id_of(const std::string& symbol) {
  const auto at = std::find(symbols_.begin(), symbols_.end(), symbol);
  if (at != symbols_.end()) return at - symbols_.begin();
  symbols_.push_back(symbol);
  return static_cast<int64_t>(symbols_.size()) - 1;
}

std::vector<double> AdaptiveConformalWalk::add(const data::Dataset& dataset, const data::Batch& batch,
                                               const model::TftOutput& out) {
  const auto units = target_units_of(dataset, batch.windows);
  const auto forecast = out.quantiles.detach().to(at::kCPU, at::kDouble).contiguous();
  const auto target = batch.target.to(at::kCPU, at::kDouble).contiguous();
  const int64_t horizon = tracker_.horizon();
  const auto nq = tracker_.levels().size();
  if (forecast.size(1) != horizon || forecast.size(2) != static_cast<int64_t>(nq)) {
    throw Error("adaptive conformal: forecasts of " + std::to_string(forecast.size(1)) + " steps and " +
                std::to_string(forecast.size(2)) + " levels, the walk's have " + std::to_string(horizon) + " and " +
                std::to_string(nq));
  }
  const auto per_window = static_cast<size_t>(horizon) * nq;
  const std::span<const double> raw(forecast.data_ptr<double>(), static_cast<size_t>(forecast.numel()));
  const double* y = target.data_ptr<double>();
  const auto encoder = static_cast<size_t>(dataset.options().encoder_length);
  std::vector<double> issued_all(raw.size());
  std::vector<int64_t> landing(static_cast<size_t>(horizon));
  for (size_t b = 0; b < batch.windows.size(); ++b) {
    const auto& window = batch.windows[b];
    const auto& series = dataset.series()[window.series];
    const size_t origin = window.start + encoder - 1;
    for (int64_t h = 0; h < horizon; ++h) {
      landing[static_cast<size_t>(h)] = series.timestamp_ns[origin + 1 + static_cast<size_t>(h)];
    }
    const int64_t id = id_of(series.symbol);
    const auto model_quantiles = raw.subspan(b * per_window, per_window);
    if (landing.front() <= tracker_.last_outcome(id)) {
      std::copy(model_quantiles.begin(), model_quantiles.end(),
                issued_all.begin() + static_cast<std::ptrdiff_t>(b * per_window));
      continue;
    }
    auto issued = tracker_.forecast_made(id, landing, model_quantiles);
    sort_quantiles(issued, static_cast<int64_t>(nq));
    const double* outcomes = y + b * static_cast<size_t>(horizon);
    for (int64_t h = 0; h < horizon; ++h) {
      const auto row = static_cast<size_t>(h) * nq;
      raw_.add(model_quantiles.subspan(row, nq), outcomes[h], units.scale[b]);
      conformal_.add(std::span<const double>(issued).subspan(row, nq), outcomes[h], units.scale[b]);
    }
    std::copy(issued.begin(), issued.end(), issued_all.begin() + static_cast<std::ptrdiff_t>(b * per_window));
    // The bar after the origin is realized before the next window's forecast is made.
    tracker_.outcome(id, landing.front(), outcomes[0]);
  }
  return issued_all;
}

void AdaptiveConformalWalk::restart_tallies() {
  raw_ = CoverageTally(tracker_.levels());
  conformal_ = CoverageTally(tracker_.levels());
}

std::map<std::string, std::vector<double>> AdaptiveConformalWalk::offsets_by_symbol() const {
  std::map<std::string, std::vector<double>> out;
  for (size_t id = 0; id < symbols_.size(); ++id) {
    out[symbols_[id]] = tracker_.offsets_for(static_cast<int64_t>(id)).offsets;
  }
  return out;
}

AdaptiveConformalWalk AdaptiveConformalWalk::from_calibration(const artifact::ConformalCalibration& calibration,
                                                              const std::vector<double>& levels, int64_t horizon) {
  if (calibration.method != "adaptive") {
    throw Error("adaptive conformal: the model's offsets are " + calibration.method + ", not adaptive");
  }
  AdaptiveConformalWalk walk(levels, horizon, calibration.rate);
  for (const auto& [symbol, offsets] : calibration.offsets) {
    const auto through = calibration.through_ns.find(symbol);
    walk.tracker_.resume_series(
        walk.id_of(symbol), offsets,
        through != calibration.through_ns.end() ? through->second : std::numeric_limits<int64_t>::min());
  }
  return walk;
}

artifact::ConformalCalibration AdaptiveConformalWalk::calibration() const {
  artifact::ConformalCalibration c{"adaptive", tracker_.rate(), 0, offsets_by_symbol(), {}};
  for (size_t id = 0; id < symbols_.size(); ++id) {
    const int64_t last = tracker_.last_outcome(static_cast<int64_t>(id));
    if (last != std::numeric_limits<int64_t>::min()) c.through_ns[symbols_[id]] = last;
  }
  return c;
}

nlohmann::json AdaptiveConformalWalk::to_json() const {
  return {{"symbols", symbols_}, {"tracker", tracker_.to_json()}};
}

AdaptiveConformalWalk AdaptiveConformalWalk::from_json(const nlohmann::json& state) {
  try {
    auto tracker = AdaptiveConformal::from_json(state.at("tracker"));
    AdaptiveConformalWalk walk(tracker.levels(), tracker.horizon(), tracker.rate());
    walk.tracker_ = std::move(tracker);
    walk.symbols_ = state.at("symbols").get<std::vector<std::string>>();
    return walk;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("adaptive conformal state: ") + e.what());
  }
}

}  // namespace qtft::eval
