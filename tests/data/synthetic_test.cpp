// The embedded data set: deterministic, valid, and with the structure it promises.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/synthetic.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

SyntheticOptions options(int64_t rows, int symbols, uint64_t seed = 5) {
  SyntheticOptions o;
  o.rows = rows;
  o.symbols = symbols;
  o.seed = seed;
  return o;
}

TEST(Synthetic, SameSeedSameBarsAndSymbolsAreIndependentStreams) {
  auto a = generate_synthetic_bars(options(3000, 3));
  auto b = generate_synthetic_bars(options(3000, 3));
  ASSERT_EQ(a.series.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(a.series[s].close, b.series[s].close);
    EXPECT_EQ(a.series[s].volume, b.series[s].volume);
  }
  auto other_seed = generate_synthetic_bars(options(3000, 3, 6));
  EXPECT_NE(a.series[0].close, other_seed.series[0].close);
  // Adding a symbol leaves the first ones' bars as they were (rows per symbol kept equal).
  auto four = generate_synthetic_bars(options(4000, 4));
  EXPECT_EQ(four.series[1].close, a.series[1].close);
  EXPECT_EQ(a.series[0].symbol, "ES");
  EXPECT_EQ(a.series[1].symbol, "NQ");
}

TEST(Synthetic, RowsAreSharedEvenlyAndPassValidationOnReadBack) {
  test::TempDir dir;
  auto bars = generate_synthetic_bars(options(1001, 2));
  EXPECT_EQ(bars.series[0].size(), 501u);
  EXPECT_EQ(bars.series[1].size(), 500u);
  write_bars_parquet(bars, dir.file("s.parquet"));
  auto back = read_bars_parquet(dir.file("s.parquet"));  // throws on any invalid row
  EXPECT_EQ(back.total_rows(), 1001u);
  for (const auto& s : bars.series) {
    for (size_t i = 0; i < s.size(); ++i) {
      ASSERT_GE(s.high[i], std::max(s.open[i], s.close[i]));
      ASSERT_LE(s.low[i], std::min(s.open[i], s.close[i]));
      ASSERT_GT(s.volume[i], 0);
    }
  }
}

TEST(Synthetic, TradesWeekdaySessionsWithGaps) {
  auto bars = generate_synthetic_bars(options(5000, 1));
  const auto& s = bars.series[0];
  int session_gaps = 0, weekend_gaps = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    int64_t t = s.timestamp_ns[i];
    ASSERT_LT(day_of_week(t), 5) << "bar on a weekend";
    int64_t minute = seconds_of_day(t) / 60;
    ASSERT_GE(minute, 8 * 60 + 30);
    ASSERT_LT(minute, 15 * 60 + 15);
    if (i == 0) continue;
    int64_t gap_minutes = (t - s.timestamp_ns[i - 1]) / (60 * kNanosPerSecond);
    if (gap_minutes > 24 * 60)
      ++weekend_gaps;
    else if (gap_minutes > 5)
      ++session_gaps;
    else
      ASSERT_EQ(gap_minutes, 5);
  }
  EXPECT_GT(session_gaps, 40);
  EXPECT_GT(weekend_gaps, 8);
}

// Mean absolute log return by bar of the session, and daily realized volatility.
struct Shape {
  double open_activity = 0, midday_activity = 0;
  double open_volume = 0, midday_volume = 0;
  double calm_day_vol = 0, stressed_day_vol = 0;
};

Shape measure(const BarSeries& s) {
  std::map<int64_t, std::vector<double>> abs_by_minute, volume_by_minute;
  std::map<int64_t, double> day_var;
  for (size_t i = 1; i < s.size(); ++i) {
    int64_t minute = seconds_of_day(s.timestamp_ns[i]) / 60;
    int64_t day = s.timestamp_ns[i] / (kSecondsPerDay * kNanosPerSecond);
    double r = std::log(s.close[i] / s.open[i]);  // within the bar: no overnight gap
    abs_by_minute[minute].push_back(std::abs(r));
    volume_by_minute[minute].push_back(s.volume[i]);
    day_var[day] += r * r;
  }
  auto mean = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m += x;
    return m / static_cast<double>(v.size());
  };
  Shape shape;
  shape.open_activity = mean(abs_by_minute[8 * 60 + 30]);
  shape.midday_activity = mean(abs_by_minute[12 * 60]);
  shape.open_volume = mean(volume_by_minute[8 * 60 + 30]);
  shape.midday_volume = mean(volume_by_minute[12 * 60]);
  std::vector<double> vols;
  for (auto& [day, v] : day_var) vols.push_back(std::sqrt(v));
  std::sort(vols.begin(), vols.end());
  shape.calm_day_vol = vols[vols.size() / 10];
  shape.stressed_day_vol = vols[vols.size() * 9 / 10];
  return shape;
}

TEST(Synthetic, HasIntradaySeasonalityAndVolatilityRegimes) {
  auto bars = generate_synthetic_bars(options(40000, 1));
  auto shape = measure(bars.series[0]);
  EXPECT_GT(shape.open_activity, 1.5 * shape.midday_activity);
  EXPECT_GT(shape.open_volume, 1.5 * shape.midday_volume);
  // Regimes make some days far calmer than others; i.i.d. noise over 81 bars would give
  // a 10th-to-90th percentile ratio of daily volatility near 1.2.
  EXPECT_GT(shape.stressed_day_vol, 2.0 * shape.calm_day_vol);
}

TEST(Synthetic, RejectsNonsenseOptions) {
  EXPECT_THROW(generate_synthetic_bars(options(10, 0)), Error);
  EXPECT_THROW(generate_synthetic_bars(options(1, 2)), Error);
}

TEST(Synthetic, ARegimeChangeLeavesTheBarsBeforeItAndShiftsVolatilityAfter) {
  auto plain = generate_synthetic_bars(options(8000, 2));
  auto shifted_options = options(8000, 2);
  shifted_options.shift_after_bar = 2500;
  shifted_options.shift_volatility = 2.0;
  shifted_options.shift_drift = 0.1;
  auto shifted = generate_synthetic_bars(shifted_options);
  for (size_t s = 0; s < 2; ++s) {
    const auto& a = plain.series[s].close;
    const auto& b = shifted.series[s].close;
    ASSERT_EQ(a.size(), b.size());
    EXPECT_TRUE(std::equal(a.begin(), a.begin() + 2500, b.begin())) << "bars before the shift moved";
    EXPECT_NE(a[2500], b[2500]);
    // Realized volatility of the close-to-close returns, after against before the shift.
    auto stdev = [](const std::vector<double>& c, size_t from, size_t to) {
      double sum = 0, sum_sq = 0;
      for (size_t i = from + 1; i < to; ++i) {
        const double r = std::log(c[i] / c[i - 1]);
        sum += r;
        sum_sq += r * r;
      }
      const double n = static_cast<double>(to - from - 1);
      return std::sqrt(sum_sq / n - (sum / n) * (sum / n));
    };
    const double ratio = stdev(b, 2500, 4000) / stdev(b, 1000, 2500);
    EXPECT_GT(ratio, 1.5) << plain.series[s].symbol;  // twice the volatility, give or take regimes
    EXPECT_LT(ratio, 3.0) << plain.series[s].symbol;
  }
  // Fewer rows give a prefix of more: the old bars of the same market.
  auto fewer = shifted_options;
  fewer.rows = 6000;
  const auto old_bars = generate_synthetic_bars(fewer);
  const auto& old_close = old_bars.series[0].close;
  ASSERT_EQ(old_close.size(), 3000u);
  EXPECT_TRUE(std::equal(old_close.begin(), old_close.end(), shifted.series[0].close.begin()));
  shifted_options.shift_volatility = 0;
  EXPECT_THROW(generate_synthetic_bars(shifted_options), UsageError);
}

}  // namespace
}  // namespace qtft::data
