#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <vector>

#include "qtft/data/features/dataset.h"

namespace qtft::data {

// The market regime of one window, measured on its encoder bars' one-bar log returns.
struct WindowRegime {
  double volatility = 0.0;      // realized: root mean square of the returns
  double trend_strength = 0.0;  // |sum of returns| / sum of |returns|: 1 a straight line, 0 a round trip
};
WindowRegime window_regime(std::span<const float> returns);

// How calibration windows fall into the terciles one regime measure has over the training split.
struct TercileCoverage {
  std::string measure;                      // "volatility", "trend strength"
  std::array<std::string, 3> names;         // low, middle, high: "calm", "normal", "volatile"
  double lower_cut = 0.0, upper_cut = 0.0;  // tercile k holds values in [cut k-1, cut k)
  std::array<size_t, 3> training{};         // training windows sampled, per tercile
  std::array<size_t, 3> calibration{};      // calibration windows, per tercile
};

// Which market regimes calibration saw. Volatility cuts are in the target's units (one-bar
// log returns by default), each window's taken back by its own series' scale.
struct RegimeCoverage {
  int64_t batches = 0;
  size_t calibration_windows = 0;
  size_t training_windows = 0;  // in the split
  size_t training_sampled = 0;  // evenly spaced among them, for the cuts
  TercileCoverage volatility, trend;
  std::vector<std::string> warnings;  // fewer than kMinBatches batches, a tercile missing or thin
};

inline constexpr int64_t kMinCalibrationBatches = 100;  // the deployment checklist's minimum
// A tercile is thin when its share of calibration windows is under this fraction of its
// share of the training split.
inline constexpr double kThinShare = 0.5;
// The terciles are cut on at most this many training windows, so that the report costs the
// same on a year of minute bars as on a week.
inline constexpr size_t kMaxTrainingSample = size_t{1} << 16;

// The regimes of `calibration` (indices of training windows, as calibration_windows gives them)
// against the training split's.
RegimeCoverage regime_coverage(const Dataset& dataset, std::span<const size_t> calibration, int64_t batches,
                               size_t max_training_sample = kMaxTrainingSample);
// The coverage of the batches calibrate_observers runs with these arguments.
RegimeCoverage calibration_coverage(const Dataset& dataset, int64_t batches, size_t batch_size, uint64_t seed);

// A few lines for the console: per measure, the share of calibration windows in each tercile
// beside the training split's, then the warnings.
std::string format_regime_coverage(const RegimeCoverage& coverage);
nlohmann::json to_json(const RegimeCoverage& coverage);

}  // namespace qtft::data
