// Features, chronological splits, normalization fitted on the training split only, and
// the window index.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>

#include "qtft/common/error.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/detail/features.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

using ::testing::HasSubstr;

DatasetOptions small_options() {
  DatasetOptions o;
  o.encoder_length = 4;
  o.horizon = 2;
  o.validation_fraction = 0.2;
  o.test_fraction = 0.2;
  return o;
}

TEST(Features, HandComputedValues) {
  BarSeries s;
  s.symbol = "ES";
  // 2024-01-01T06:00:00Z (a Monday) then 2024-01-01T12:00:00Z: a 360-minute gap.
  s.timestamp_ns = {1704088800LL * 1'000'000'000, 1704110400LL * 1'000'000'000};
  s.open = {99, 100};
  s.high = {101, 104};
  s.low = {98, 100};
  s.close = {100, 102};
  s.volume = {10, 99};
  const auto derived = derived_inputs_for(BarFields::all(), false, calendar_for_spacing(0));
  auto f = compute_raw_features(s, derived, "");
  ASSERT_EQ(f.target.size(), 1u);
  EXPECT_DOUBLE_EQ(f.observed[0], std::log(102.0 / 100.0));  // log_return
  EXPECT_DOUBLE_EQ(f.observed[1], std::log(104.0 / 100.0));  // hl_range
  EXPECT_DOUBLE_EQ(f.observed[2], std::log(102.0 / 100.0));  // close_open
  EXPECT_DOUBLE_EQ(f.observed[3], std::log(100.0));          // log(1 + 99)
  EXPECT_DOUBLE_EQ(f.observed[4], std::log(361.0));          // bar_gap: log(1 + 360 minutes)
  // Noon: time-of-day phase pi; Monday: day-of-week phase 0.
  EXPECT_NEAR(f.known[0], 0.0, 1e-15);
  EXPECT_DOUBLE_EQ(f.known[1], -1.0);
  EXPECT_DOUBLE_EQ(f.known[2], 0.0);
  EXPECT_DOUBLE_EQ(f.known[3], 1.0);
  EXPECT_EQ(f.known.size(), 4u);
  EXPECT_EQ(names_of(derived.observed),
            (std::vector<std::string>{"log_return", "hl_range", "close_open", "log_volume", "bar_gap"}));
  EXPECT_EQ(names_of(derived_inputs_for({}, false, {}).observed), (std::vector<std::string>{"log_return", "bar_gap"}));
  EXPECT_EQ(names_of(derived_inputs_for({}, true, {}).observed),
            (std::vector<std::string>{"log_return", "bar_gap", "target"}));
}

TEST(Dataset, SplitsChronologicallyWithoutWindowsCrossingBoundaries) {
  auto bars = test::regular_bar_set(101, 2);  // 100 feature rows per symbol
  auto d = Dataset::build(bars, small_options());
  // Rows per symbol: train [0, 60), validation [60, 80), test [80, 100).
  EXPECT_EQ(d.series()[0].split_bounds, (std::array<int64_t, 4>{0, 60, 80, 100}));
  // Windows of 6 rows: 55 + 15 + 15 per symbol.
  EXPECT_EQ(d.num_windows(Split::Train), 110u);
  EXPECT_EQ(d.num_windows(Split::Validation), 30u);
  EXPECT_EQ(d.num_windows(Split::Test), 30u);
  for (Split split : kAllSplits) {
    auto k = static_cast<size_t>(split);
    std::vector<int> per_series(2, 0);
    for (size_t i = 0; i < d.num_windows(split); ++i) {
      auto w = d.window(split, i);
      const auto& b = d.series()[w.series].split_bounds;
      EXPECT_GE(w.start, b[k]);
      EXPECT_LE(w.start + 6, b[k + 1]) << split_name(split) << " window " << i;
      ++per_series[w.series];
    }
    EXPECT_EQ(per_series[0], per_series[1]);
  }
  EXPECT_EQ(d.window(Split::Validation, 0).start, 60u);
  EXPECT_EQ(d.window(Split::Validation, 15).series, 1u);
  EXPECT_THROW(d.window(Split::Test, 30), Error);
  // All: every window of 6 rows in 100, across the bounds: 95 per symbol, in order.
  EXPECT_EQ(d.num_windows(Split::All), 190u);
  EXPECT_EQ(d.window(Split::All, 0).start, 0u);
  EXPECT_EQ(d.window(Split::All, 94).start, 94u);
  EXPECT_EQ(d.window(Split::All, 95).series, 1u);
  EXPECT_EQ(d.window(Split::All, 95).start, 0u);
  EXPECT_EQ(std::string(split_name(Split::All)), "all");
}

TEST(Dataset, NormalizationComesFromTheTrainingSplitOnly) {
  auto bars = test::regular_bar_set(101, 1);
  auto baseline = Dataset::build(bars, small_options());
  // Wild values after the training split must not move the statistics at all.
  auto changed = bars;
  auto& s = changed.series[0];
  for (size_t i = 62; i < s.size(); ++i) {
    s.close[i] *= 5;
    s.high[i] *= 5;
    s.low[i] *= 5;
    s.open[i] *= 5;
    s.volume[i] *= 1000;
  }
  auto d = Dataset::build(changed, small_options());
  for (size_t j = 0; j < d.schema().observed.size(); ++j) {
    EXPECT_EQ(d.schema().observed[j].mean, baseline.schema().observed[j].mean) << d.schema().observed[j].name;
    EXPECT_EQ(d.schema().observed[j].std, baseline.schema().observed[j].std) << d.schema().observed[j].name;
  }
  EXPECT_EQ(d.schema().target_scale, baseline.schema().target_scale);

  // And they equal the moments of the first 60 feature rows, computed here directly.
  auto raw = compute_raw_features(bars.series[0], derived_inputs_for(BarFields::all(), false, {}), "");
  double mean = 0, var = 0;
  constexpr int kWidth = 5;  // log_return, hl_range, close_open, log_volume, bar_gap
  for (int r = 0; r < 60; ++r) mean += raw.observed[r * kWidth + 3];
  mean /= 60;
  for (int r = 0; r < 60; ++r) var += std::pow(raw.observed[r * kWidth + 3] - mean, 2);
  EXPECT_NEAR(d.schema().observed[3].mean, mean, 1e-12);
  EXPECT_NEAR(d.schema().observed[3].std, std::sqrt(var / 60), 1e-12);
  // Normalized training rows have mean 0 and std 1.
  double sum = 0;
  for (int r = 0; r < 60; ++r) sum += d.series()[0].observed[r * kWidth + 3];
  EXPECT_NEAR(sum / 60, 0.0, 1e-5);
}

TEST(Dataset, TargetsAreTheScaledFutureReturns) {
  auto bars = test::regular_bar_set(101, 1);
  auto d = Dataset::build(bars, small_options());
  const auto& s = d.series()[0];
  const auto& c = bars.series[0].close;
  // Feature row r describes bar r + 1.
  for (int r = 0; r < 100; ++r) {
    EXPECT_FLOAT_EQ(s.target[r], static_cast<float>(std::log(c[r + 1] / c[r]) / d.schema().target_scale));
  }
  EXPECT_EQ(s.timestamp_ns[0], bars.series[0].timestamp_ns[1]);
}

TEST(Dataset, SavedSpecIsAppliedAndChecked) {
  auto bars = test::regular_bar_set(101, 2);
  auto trained = Dataset::build(bars, small_options());
  auto other = test::regular_bar_set(101, 1);
  other.series[0].close[5] *= 1.01;
  auto applied = Dataset::build(other, small_options(), trained.schema());
  EXPECT_EQ(applied.schema().observed[0].mean, trained.schema().observed[0].mean);

  auto unknown = other;
  unknown.series[0].symbol = "ZZ";
  EXPECT_THAT(test::error_message([&] { Dataset::build(unknown, small_options(), trained.schema()); }),
              HasSubstr("symbol 'ZZ' was not in the training data (known: S0, S1)"));
  auto no_volume = other;
  no_volume.fields = {};
  no_volume.fields.add(BarField::OpenHighLow);
  EXPECT_THAT(test::error_message([&] { Dataset::build(no_volume, small_options(), trained.schema()); }),
              HasSubstr("the model was trained on bars with volume (input log_volume) but this file has none"));
  auto close_only = other;
  close_only.fields = {};
  EXPECT_THAT(test::error_message([&] { Dataset::build(close_only, small_options(), trained.schema()); }),
              HasSubstr("trained on open/high/low bars"));
}

TEST(Dataset, ASavedSchemaFindsEachSeriesByNameInAnyOrder) {
  // Per-series scaling: a series given another one's statistics would show in its features.
  auto bars = test::regular_bar_set(101, 2);
  bars.declared.target.normalize = Normalization::PerSeries;
  const auto trained = Dataset::build(bars, small_options());
  auto swapped = bars;
  std::swap(swapped.series[0], swapped.series[1]);
  const auto applied = Dataset::build(swapped, small_options(), trained.schema());
  ASSERT_EQ(applied.series().size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const auto& a = applied.series()[k];
    const auto& t = trained.series()[1 - k];
    EXPECT_EQ(a.symbol, t.symbol);
    EXPECT_EQ(a.symbol_id, t.symbol_id);
    EXPECT_TRUE(std::ranges::equal(a.observed, t.observed)) << a.symbol;
    EXPECT_TRUE(std::ranges::equal(a.target, t.target)) << a.symbol;
  }
  EXPECT_NE(trained.schema().series_stats[0].target_scale, trained.schema().series_stats[1].target_scale);
}

TEST(Dataset, AOneSymbolModelAppliesToItsSeriesUnderAnyNameAndIgnoresExtraColumns) {
  auto bars = test::regular_bar_set(101, 1);
  bars.fields = {};  // the model reads no volume (nor the range, read or not)
  bars.fields.add(BarField::OpenHighLow);
  for (auto& s : bars.series) s.volume.clear();
  auto trained = Dataset::build(bars, small_options());
  auto renamed = test::regular_bar_set(101, 1);  // with volume, which the model ignores
  renamed.series[0].symbol = "recent";
  auto applied = Dataset::build(renamed, small_options(), trained.schema());
  EXPECT_EQ(applied.series()[0].symbol, "S0");  // the model's name for it
  EXPECT_EQ(applied.series()[0].observed.size(), trained.series()[0].observed.size());
  EXPECT_TRUE(std::ranges::equal(applied.series()[0].observed, trained.series()[0].observed));
  // Two series are not "the" series: each name must be known.
  auto two = test::regular_bar_set(101, 2);
  EXPECT_THAT(test::error_message([&] { Dataset::build(two, small_options(), trained.schema()); }),
              HasSubstr("symbol 'S1' was not in the training data (known: S0)"));
}

TEST(Dataset, KnownInputsAreAFunctionOfTheTimestampAlone) {
  auto bars = test::regular_bar_set(101, 1);
  auto d = Dataset::build(bars, small_options());
  const auto& s = d.series()[0];
  auto known = known_inputs_at(s.timestamp_ns, d.schema());
  EXPECT_TRUE(std::ranges::equal(known, s.known));
  // A week's halt before bar 50 (same time of day, same weekday after it): the known inputs
  // do not see it; the observed bar_gap of row 49, which describes bar 50, does.
  auto halted = bars;
  for (size_t i = 50; i < halted.series[0].size(); ++i) halted.series[0].timestamp_ns[i] += 7 * 86'400'000'000'000LL;
  auto h = Dataset::build(halted, small_options(), d.schema());
  EXPECT_TRUE(std::ranges::equal(h.series()[0].known, s.known));
  constexpr size_t kWidth = 5, kBarGap = 4;
  for (size_t r = 0; r < s.rows(); ++r) {
    const bool changed = h.series()[0].observed[r * kWidth + kBarGap] != s.observed[r * kWidth + kBarGap];
    EXPECT_EQ(changed, r == 49) << "row " << r;
  }
}

TEST(Dataset, TooFewRowsForOneWindowNamesTheNeed) {
  auto bars = test::regular_bar_set(20, 1);
  auto message = test::error_message([&] { Dataset::build(bars, small_options()); });
  EXPECT_THAT(message, HasSubstr("test bars: too few rows for one validation window"));
  EXPECT_THAT(message, HasSubstr("needs 6 consecutive bars (encoder 4 + horizon 2)"));
  EXPECT_THAT(message, HasSubstr("'S0' has only 20 rows"));
}

TEST(Dataset, OptionsAreValidated) {
  auto o = small_options();
  o.horizon = 0;
  EXPECT_THROW(o.validate(), UsageError);
  o = small_options();
  o.validation_fraction = 0.6;
  o.test_fraction = 0.4;
  EXPECT_THROW(o.validate(), UsageError);
}

}  // namespace
}  // namespace qtft::data
