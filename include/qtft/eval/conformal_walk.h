#pragma once

// Adaptive conformal quantiles along a walk of forecasts in time order (a backtest's folds,
// one after the other): each window's quantiles are issued with the offsets its series has
// learned so far, then the bar that follows the window's origin is realized and every
// earlier forecast with a step landing on it moves that step's offsets (eval/conformal.h).
// A window's outcomes beyond its first step are taken when later windows realize them, so
// a forecast never learns from a bar after its origin.
#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "qtft/artifact/model_file.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/conformal.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

class AdaptiveConformalWalk {
 public:
  // Throws qtft::Error for a rate outside (0, 1] or levels outside (0, 1).
  AdaptiveConformalWalk(std::vector<double> levels, int64_t horizon, double rate);

  // The windows of `batch` (of `dataset`, each series' windows in origin order across the
  // calls), forecast as `out`: their quantiles with the offsets in force, crossing ones
  // sorted, [windows, horizon, levels] in the model's scaled units. Tallies the raw and the
  // conformal quantiles against the outcomes. A window whose first step lands on a bar
  // already learned from is passed over (its rows keep the model's quantiles, untallied).
  std::vector<double> add(const data::Dataset& dataset, const data::Batch& batch, const model::TftOutput& out);

  // The tallies since the last restart_tallies (a fold's).
  QuantileCoverage raw() const { return raw_.result(); }
  QuantileCoverage conformal() const { return conformal_.result(); }
  void restart_tallies();

  // Each symbol's offsets now, [horizon, levels] row-major.
  std::map<std::string, std::vector<double>> offsets_by_symbol() const;
  double rate() const { return tracker_.rate(); }

  // A walk going on from the offsets saved with a model (adaptive; `levels` and `horizon`
  // its own), each symbol's bars through calibration.through_ns already learned from: add
  // passes over the windows whose first step lands on or before them. And back.
  static AdaptiveConformalWalk from_calibration(const artifact::ConformalCalibration& calibration,
                                                const std::vector<double>& levels, int64_t horizon);
  artifact::ConformalCalibration calibration() const;

  // The whole state (the tracker's, with the symbols it knows), to go on exactly after a
  // stop; from_json throws qtft::Error naming what is wrong.
  nlohmann::json to_json() const;
  static AdaptiveConformalWalk from_json(const nlohmann::json& state);

 private:
  int64_t id_of(const std::string& symbol);

  AdaptiveConformal tracker_;
  std::vector<std::string> symbols_;  // by tracker id
  CoverageTally raw_, conformal_;
};

}  // namespace qtft::eval
