#include "qtft/data/features/regime_coverage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "qtft/common/format.h"
#include "qtft/data/features/batch_order.h"

namespace qtft::data {
namespace {

size_t tercile_of(double value, const TercileCoverage& t) {
  if (value < t.lower_cut) return 0;
  return value < t.upper_cut ? 1 : 2;
}

// Cuts at the 1/3 and 2/3 order statistics of the sample.
void cut(std::vector<double> values, TercileCoverage& t) {
  std::sort(values.begin(), values.end());
  t.lower_cut = values[values.size() / 3];
  t.upper_cut = values[2 * values.size() / 3];
}

double share(size_t count, size_t total) { return total == 0 ? 0.0 : static_cast<double>(count) / total; }

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", 100.0 * fraction);
  return text;
}

void warn_about(const TercileCoverage& t, const RegimeCoverage& c, std::vector<std::string>& warnings) {
  for (size_t k = 0; k < 3; ++k) {
    const double trained = share(t.training[k], c.training_sampled);
    const double calibrated = share(t.calibration[k], c.calibration_windows);
    if (trained == 0.0) continue;  // ties put no training window here: nothing to cover
    const std::string where = "the " + t.names[k] + " tercile of " + t.measure;
    if (t.calibration[k] == 0) {
      warnings.push_back("missing: no calibration window in " + where + " (" + percent(trained) + " of training)");
    } else if (calibrated < kThinShare * trained) {
      warnings.push_back("thin: " + where + " is " + percent(calibrated) + " of calibration windows against " +
                         percent(trained) + " of training");
    }
  }
}

}  // namespace

WindowRegime window_regime(std::span<const float> returns) {
  double sum = 0.0, sum_abs = 0.0, sum_sq = 0.0;
  for (float r : returns) {
    sum += r;
    sum_abs += std::abs(r);
    sum_sq += static_cast<double>(r) * r;
  }
  WindowRegime regime;
  if (returns.empty()) return regime;
  regime.volatility = std::sqrt(sum_sq / static_cast<double>(returns.size()));
  regime.trend_strength = sum_abs == 0.0 ? 0.0 : std::abs(sum) / sum_abs;
  return regime;
}

RegimeCoverage regime_coverage(const Dataset& dataset, std::span<const size_t> calibration, int64_t batches,
                               size_t max_training_sample) {
  RegimeCoverage c;
  c.batches = batches;
  c.calibration_windows = calibration.size();
  c.training_windows = dataset.num_windows(Split::Train);
  c.volatility = {"volatility", {"calm", "normal", "volatile"}};
  c.trend = {"trend strength", {"ranging", "mixed", "trending"}};
  const auto length = static_cast<size_t>(dataset.options().encoder_length);
  // The target is (the log return - center) over the training std, the series' own under
  // per-series normalization: volatility is reported in the target's units, around its center.
  std::vector<float> returns(length);
  auto regime_of = [&](size_t index) {
    auto w = dataset.window(Split::Train, index);
    const auto& series = dataset.series()[w.series];
    dataset.copy(series.target.subspan(w.start, length), returns.data());
    auto r = window_regime(returns);
    r.volatility *= target_scaling_of(dataset.schema(), series.symbol_id).scale;
    return r;
  };

  c.training_sampled = std::min(c.training_windows, std::max<size_t>(max_training_sample, 1));
  std::vector<WindowRegime> sample;
  sample.reserve(c.training_sampled);
  for (size_t i = 0; i < c.training_sampled; ++i) {
    sample.push_back(regime_of(static_cast<size_t>(static_cast<double>(i) * c.training_windows / c.training_sampled)));
  }
  if (sample.empty()) return c;
  std::vector<double> values(sample.size());
  std::transform(sample.begin(), sample.end(), values.begin(), [](auto& r) { return r.volatility; });
  cut(values, c.volatility);
  std::transform(sample.begin(), sample.end(), values.begin(), [](auto& r) { return r.trend_strength; });
  cut(std::move(values), c.trend);
  for (const auto& r : sample) {
    ++c.volatility.training[tercile_of(r.volatility, c.volatility)];
    ++c.trend.training[tercile_of(r.trend_strength, c.trend)];
  }
  for (size_t index : calibration) {
    auto r = regime_of(index);
    ++c.volatility.calibration[tercile_of(r.volatility, c.volatility)];
    ++c.trend.calibration[tercile_of(r.trend_strength, c.trend)];
  }

  if (batches < kMinCalibrationBatches) {
    c.warnings.push_back("few: " + std::to_string(batches) + " calibration batches, under the " +
                         std::to_string(kMinCalibrationBatches) + " the deployment checklist asks for");
  }
  warn_about(c.volatility, c, c.warnings);
  warn_about(c.trend, c, c.warnings);
  return c;
}

RegimeCoverage calibration_coverage(const Dataset& dataset, int64_t batches, size_t batch_size, uint64_t seed) {
  auto windows = calibration_windows(dataset.num_windows(Split::Train), batches, batch_size, seed);
  return regime_coverage(dataset, windows, batches);
}

std::string format_regime_coverage(const RegimeCoverage& c) {
  std::string out = "Calibration coverage: " + std::to_string(c.calibration_windows) + " windows in " +
                    std::to_string(c.batches) + " batches; regimes cut into terciles on " +
                    std::to_string(c.training_sampled) + " of " + std::to_string(c.training_windows) +
                    " training windows (calibration / training)\n";
  for (const auto* t : {&c.volatility, &c.trend}) {
    out += "  " + t->measure + " (cuts " + format_rounded(t->lower_cut) + ", " + format_rounded(t->upper_cut) + "):";
    for (size_t k = 0; k < 3; ++k) {
      out += std::string(k == 0 ? " " : ", ") + t->names[k] + " " +
             percent(share(t->calibration[k], c.calibration_windows)) + " / " +
             percent(share(t->training[k], c.training_sampled));
    }
    out += "\n";
  }
  if (c.warnings.empty()) out += "  every regime covered\n";
  for (const auto& w : c.warnings) out += "  WARNING " + w + "\n";
  return out;
}

nlohmann::json to_json(const RegimeCoverage& c) {
  auto terciles = [](const TercileCoverage& t) {
    nlohmann::json j = nlohmann::json::array();
    for (size_t k = 0; k < 3; ++k) {
      j.push_back(
          {{"regime", t.names[k]}, {"calibration_windows", t.calibration[k]}, {"training_windows", t.training[k]}});
    }
    return nlohmann::json{{"cuts", {t.lower_cut, t.upper_cut}}, {"terciles", j}};
  };
  return {{"batches", c.batches},
          {"calibration_windows", c.calibration_windows},
          {"training_windows", c.training_windows},
          {"training_sampled", c.training_sampled},
          {"volatility", terciles(c.volatility)},
          {"trend_strength", terciles(c.trend)},
          {"warnings", c.warnings}};
}

}  // namespace qtft::data
