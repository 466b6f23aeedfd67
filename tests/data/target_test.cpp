// Any target: a column of the file (or the close) under a transform, standardized pooled or
// per series on the training split, its past an observed input, recorded in the spec and
// refused clearly where the transform cannot take a value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <sstream>

#include "qtft/common/format.h"
#include "qtft/data/bars/bars.h"
#include "qtft/data/features/dataset_summary.h"
#include "qtft/data/features/detail/features.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "support/temp_dir.h"
#include "support/tiny_windows.h"

namespace qtft::data {
namespace {

using test::tiny_windows;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Two series of 20 bars with a column rv: ES 1 + i, NQ 100 + 10 i at bar i; `cells`
// replaces ES's rv cells by bar.
std::string target_csv(const std::map<int, std::string>& cells = {}) {
  std::ostringstream out;
  out << "timestamp,symbol,close,rv\n";
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < 20; ++i) {
      const int64_t ns = (1704184200LL + 300LL * i) * 1'000'000'000;
      const auto cell = s == 0 ? cells.find(i) : cells.end();
      const std::string rv = cell != cells.end() ? cell->second : std::to_string(s ? 100 + 10 * i : 1 + i);
      out << format_utc(ns) << "," << (s ? "NQ" : "ES") << "," << 100 + i + s << "," << rv << "\n";
    }
  }
  return out.str();
}

BarReadOptions targeting(const std::string& column, TargetTransform transform, Normalization normalize) {
  BarReadOptions o;
  o.inputs.target = {column, transform, normalize};
  return o;
}

// 19 feature rows per series (bars 2..20), the first floor(19 x 0.6) = 11 train: bars 2..12.
TEST(Target, AColumnAsItIsCenteredAndScaledOverAllSeries) {
  test::TempDir dir;
  const auto bars =
      read_bars_csv(dir.write("t.csv", target_csv()), targeting("rv", TargetTransform::None, Normalization::Pooled));
  EXPECT_TRUE(bars.unused_columns.empty());  // the target column is read
  const auto d = Dataset::build(bars, tiny_windows());
  const auto& spec = d.schema();
  // Training values: ES 2..12 and NQ 110..210.
  double mean = 0, m2 = 0;
  for (int i = 1; i <= 11; ++i) mean += (1 + i) + (100 + 10 * i);
  mean /= 22;
  for (int i = 1; i <= 11; ++i) m2 += std::pow(1 + i - mean, 2) + std::pow(100 + 10 * i - mean, 2);
  EXPECT_NEAR(spec.target_center, mean, 1e-9);
  EXPECT_NEAR(spec.target_scale, std::sqrt(m2 / 22), 1e-9);
  // The target's past is an observed input; its level is what forecasts convert back to.
  ASSERT_EQ(spec.observed.size(), 3u);
  EXPECT_EQ(spec.observed[2].name, "target");
  const auto& es = d.series()[0];
  EXPECT_FLOAT_EQ(es.target[0], static_cast<float>((2.0 - spec.target_center) / spec.target_scale));
  EXPECT_EQ(es.close[0], 2.0);
  EXPECT_THAT(summarize_dataset(d),
              HasSubstr("target: next 1 values of 'rv' (centered on " + format_number(spec.target_center) +
                        " and scaled by " + format_number(spec.target_scale)));
}

TEST(Target, PerSeriesEachSeriesHasItsOwnStatistics) {
  test::TempDir dir;
  const auto bars =
      read_bars_csv(dir.write("t.csv", target_csv()), targeting("rv", TargetTransform::None, Normalization::PerSeries));
  const auto d = Dataset::build(bars, tiny_windows());
  const auto& spec = d.schema();
  ASSERT_EQ(spec.series_stats.size(), 2u);
  // ES 2..12: mean 7, population variance (11^2 - 1) / 12 = 10; NQ ten times that spread.
  EXPECT_NEAR(spec.series_stats[0].target_center, 7.0, 1e-12);
  EXPECT_NEAR(spec.series_stats[0].target_scale, std::sqrt(10.0), 1e-12);
  EXPECT_NEAR(spec.series_stats[1].target_center, 160.0, 1e-12);
  EXPECT_NEAR(spec.series_stats[1].target_scale, 10.0 * std::sqrt(10.0), 1e-12);
  // The real inputs too: the observed 'target' input of NQ.
  EXPECT_NEAR(spec.series_stats[1].observed_mean[2], 160.0, 1e-12);
  EXPECT_FLOAT_EQ(d.series()[1].target[0], static_cast<float>((110.0 - 160.0) / (10.0 * std::sqrt(10.0))));
  EXPECT_FLOAT_EQ(d.series()[1].observed[2], static_cast<float>((110.0 - 160.0) / (10.0 * std::sqrt(10.0))));

  // The spec round-trips through its JSON, and a model reads its bars the same way.
  const auto back = input_schema_from_json(to_json(spec));
  EXPECT_EQ(back.target(), spec.target());
  EXPECT_EQ(back.series_stats[1].observed_mean, spec.series_stats[1].observed_mean);
  EXPECT_EQ(back.series_stats[0].target_scale, spec.series_stats[0].target_scale);
  const auto again = Dataset::build(read_bars_csv(dir.file("t.csv"), {.inputs = back.declared}), tiny_windows(), back);
  EXPECT_EQ(again.series()[1].target[5], d.series()[1].target[5]);
  // Bars read for another target are refused, naming both.
  EXPECT_THAT(test::error_message([&] { Dataset::build(read_bars_csv(dir.file("t.csv")), tiny_windows(), back); }),
              HasSubstr("t.csv: the model forecasts none of 'rv', per-series but the bars were read for log-return "
                        "of the close, pooled"));
}

TEST(Target, TodaysTargetWritesNothingNewAndALogReturnIsNotCentered) {
  test::TempDir dir;
  const auto file = dir.write("t.csv", target_csv());
  const auto plain = Dataset::build(read_bars_csv(file), tiny_windows()).schema();
  EXPECT_FALSE(to_json(plain).contains("target"));
  EXPECT_FALSE(to_json(plain).contains("series_stats"));
  EXPECT_EQ(plain.target_center, 0.0);
  EXPECT_EQ(plain.observed.size(), 2u);  // log_return is the target's past
  const auto lr = Dataset::build(
      read_bars_csv(file, targeting("rv", TargetTransform::LogReturn, Normalization::Pooled)), tiny_windows());
  EXPECT_EQ(lr.schema().target_center, 0.0);
  EXPECT_FLOAT_EQ(lr.series()[0].target[0], static_cast<float>(std::log(2.0 / 1.0) / lr.schema().target_scale));
}

TEST(Target, ValuesATransformCannotTakeNameTheFileColumnAndRow) {
  test::TempDir dir;
  auto refused = [&](const std::map<int, std::string>& cells, TargetTransform t) {
    return test::error_message(
        [&] { read_bars_csv(dir.write("t.csv", target_csv(cells)), targeting("rv", t, Normalization::Pooled)); });
  };
  const std::string f = dir.file("t.csv");
  EXPECT_EQ(refused({{4, "0"}}, TargetTransform::Log),
            f + ": column 'rv', row 5: value 0 is not positive: --target-transform log takes its log");
  EXPECT_EQ(refused({{4, "-2"}}, TargetTransform::LogReturn),
            f + ": column 'rv', row 5: value -2 is not positive: --target-transform log-return takes the log of its "
                "ratios");
  EXPECT_EQ(refused({{4, "-1"}}, TargetTransform::Log1p),
            f + ": column 'rv', row 5: value -1 is not above -1: --target-transform log1p takes the log of 1 + it");
  EXPECT_NO_THROW(read_bars_csv(dir.write("t.csv", target_csv({{4, "-2"}})),
                                targeting("rv", TargetTransform::None, Normalization::Pooled)));
  // An interior null is never filled forward; leading nulls are a warm-up.
  EXPECT_THAT(
      refused({{4, ""}}, TargetTransform::None),
      HasSubstr(
          "column 'rv', row 5: missing value (null or NaN) inside symbol 'ES': the target has no value at this bar"));
  const auto warm = read_bars_csv(dir.write("w.csv", target_csv({{0, ""}, {1, ""}})),
                                  targeting("rv", TargetTransform::None, Normalization::Pooled));
  EXPECT_EQ(warm.leading_null_rows, 2);
  EXPECT_THAT(test::error_message([&] {
                read_bars_csv(dir.write("n.csv", target_csv()),
                              targeting("nope", TargetTransform::None, Normalization::Pooled));
              }),
              HasSubstr("--target-column 'nope' is not in the file (columns: timestamp, symbol, close, rv)"));
  // Bars built in memory: the series and bar.
  BarSeries s;
  s.symbol = "ES";
  s.timestamp_ns = {0, 300'000'000'000};
  s.close = {1, 2};
  s.target_values = {1, -3};
  EXPECT_THAT(test::error_message([&] {
                compute_raw_features(s, derived_inputs_for({}, true, {}), "",
                                     {"rv", TargetTransform::Log, Normalization::Pooled});
              }),
              HasSubstr("symbol 'ES', bar 2 (1970-01-01T00:05:00Z): target column 'rv' value -3 is not positive"));
}

}  // namespace
}  // namespace qtft::data
