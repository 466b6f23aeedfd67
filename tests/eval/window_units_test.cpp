// Metrics in the target's own units: each window goes back with its own series' center and
// scale, so that figures of a per-series model are in the column's units, as a desk reads them.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "qtft/common/format.h"
#include "qtft/data/bars/bars.h"
#include "qtft/eval/baselines.h"
#include "qtft/eval/window_units.h"
#include "support/temp_dir.h"
#include "support/tiny_windows.h"

namespace qtft::eval {
namespace {

const std::vector<double> kQuantiles{0.1, 0.5, 0.9};

// Two series of 20 bars whose column rv is ES 1 + i and NQ 100 + 10 i at bar i.
std::string two_scales_csv() {
  std::ostringstream out;
  out << "timestamp,symbol,close,rv\n";
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < 20; ++i) {
      const int64_t ns = (1704184200LL + 300LL * i) * 1'000'000'000;
      out << format_utc(ns) << "," << (s ? "NQ" : "ES") << "," << 100 + i + s << "," << (s ? 100 + 10 * i : 1 + i)
          << "\n";
    }
  }
  return out.str();
}

data::Dataset rv_dataset(const test::TempDir& dir, data::Normalization normalize) {
  data::BarReadOptions o;
  o.inputs.target = {"rv", data::TargetTransform::None, normalize};
  return data::Dataset::build(data::read_bars_csv(dir.file("t.csv"), o), test::tiny_windows());
}

// rv at a window's first forecast step: the dataset's row r is bar r + 1.
double rv_ahead(const data::Dataset& d, data::Split split, size_t window) {
  const auto w = d.window(split, window);
  const auto bar = static_cast<int>(w.start + d.options().encoder_length) + 1;
  return d.series()[w.series].symbol == "NQ" ? 100.0 + 10.0 * bar : 1.0 + bar;
}

TEST(WindowUnits, PerSeriesWindowsTakeTheirOwnSeriesScale) {
  test::TempDir dir;
  dir.write("t.csv", two_scales_csv());
  const auto d = rv_dataset(dir, data::Normalization::PerSeries);
  const size_t n = d.num_windows(data::Split::Validation);
  const auto units = target_units_of(d, data::Split::Validation, 0, n);
  ASSERT_EQ(units.scale.size(), n);
  for (size_t i = 0; i < n; ++i) {
    const auto& own =
        d.schema().series_stats[static_cast<size_t>(d.series()[d.window(data::Split::Validation, i).series].symbol_id)];
    EXPECT_EQ(units.scale[i], own.target_scale) << i;
    EXPECT_EQ(units.center[i], own.target_center) << i;
  }
}

// The zero baseline forecasts each series' center; in the target's units its median error is
// the column's value minus that center, so its MAE is the mean of |rv - center| over windows.
TEST(WindowUnits, BaselinesInTheTargetsUnitsAreInTheColumnsUnits) {
  test::TempDir dir;
  dir.write("t.csv", two_scales_csv());
  for (auto normalize : {data::Normalization::PerSeries, data::Normalization::Pooled}) {
    const auto d = rv_dataset(dir, normalize);
    const auto split = data::Split::Validation;
    double abs_sum = 0.0;
    const size_t n = d.num_windows(split);
    for (size_t i = 0; i < n; ++i) {
      const auto symbol_id = d.series()[d.window(split, i).series].symbol_id;
      abs_sum += std::abs(rv_ahead(d, split, i) - data::target_scaling_of(d.schema(), symbol_id).center);
    }
    const auto zero = evaluate_baselines(d, split, kQuantiles).zero;
    EXPECT_NEAR(zero.in_target_units.mae, abs_sum / static_cast<double>(n), 1e-4 * abs_sum / static_cast<double>(n));
    if (normalize == data::Normalization::Pooled) {
      // One scale: the scaled figures times it.
      EXPECT_NEAR(zero.in_target_units.loss, zero.loss * d.schema().target_scale, 1e-12 * zero.in_target_units.loss);
      EXPECT_NEAR(zero.in_target_units.rmse, zero.rmse * d.schema().target_scale, 1e-12 * zero.in_target_units.rmse);
    }
  }
}

}  // namespace
}  // namespace qtft::eval
