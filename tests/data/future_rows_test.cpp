// Future rows: the rows after a series' last bar whose close is empty hold the bars ahead of
// a forecast, their scheduled times and the declared known inputs there. Only a reader that
// asks for them takes them; every mistake names the file, column and row.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "qtft/common/format.h"
#include "qtft/data/bars/bars.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

int64_t bar_time(int i) { return (1704184200LL + 300LL * i) * 1'000'000'000; }

// ES: bars 0-4 (close 100 + i, x = i, k = 10 i), then `ahead` rows with only the timestamp
// and k; NQ: bars 0-4 with no future rows. `extra` is appended as written.
std::string future_csv(int ahead, const std::string& extra = "") {
  std::ostringstream out;
  out << "timestamp,symbol,close,volume,x,k\n";
  for (int i = 0; i < 5; ++i)
    out << format_utc(bar_time(i)) << ",ES," << 100 + i << ",10," << i << "," << 10 * i << "\n";
  for (int i = 5; i < 5 + ahead; ++i) out << format_utc(bar_time(i)) << ",ES,,,," << 10 * i << "\n";
  for (int i = 0; i < 5; ++i)
    out << format_utc(bar_time(i)) << ",NQ," << 200 + i << ",10," << i << "," << 10 * i << "\n";
  out << extra;
  return out.str();
}

BarReadOptions forecast_reading() {
  BarReadOptions o;
  o.inputs = {{"x"}, {"k"}};
  o.future_rows = true;
  return o;
}

TEST(FutureRows, HoldTheTimesAndKnownValuesOfTheBarsAhead) {
  test::TempDir dir;
  const auto bars = read_bars_csv(dir.write("f.csv", future_csv(3)), forecast_reading());
  ASSERT_EQ(bars.series.size(), 2u);
  const auto& es = bars.series[0];
  EXPECT_EQ(es.size(), 5u);  // the future rows are not bars
  EXPECT_THAT(es.future_timestamp_ns, ElementsAre(bar_time(5), bar_time(6), bar_time(7)));
  ASSERT_EQ(es.future_known.size(), 1u);
  EXPECT_THAT(es.future_known[0], ElementsAre(50.0, 60.0, 70.0));
  EXPECT_TRUE(bars.series[1].future_timestamp_ns.empty());
  EXPECT_NO_THROW(validate_series(es, "f.csv"));

  // The latest bars of a forecast keep them; a slice that stops short of the end does not.
  BarSeries tail = es;
  keep_last_bars(tail, 2);
  EXPECT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail.future_known, es.future_known);
  EXPECT_TRUE(slice_bars(es, 0, 4).future_timestamp_ns.empty());
}

TEST(FutureRows, AnEmptyCloseIsAnErrorForEveryOtherReader) {
  test::TempDir dir;
  BarReadOptions o;
  o.inputs = {{"x"}, {"k"}};
  EXPECT_EQ(test::error_message([&] { read_bars_csv(dir.write("f.csv", future_csv(2)), o); }),
            dir.file("f.csv") +
                ": column 'close', row 6: null value (a row ahead with an empty close is read by forecast only)");
}

TEST(FutureRows, MistakesNameTheFileColumnAndRow) {
  test::TempDir dir;
  auto refused = [&](const std::string& csv) {
    return test::error_message([&] { read_bars_csv(dir.write("f.csv", csv), forecast_reading()); });
  };
  const std::string f = dir.file("f.csv");
  // A future row lacking its known value.
  EXPECT_EQ(refused(future_csv(0, format_utc(bar_time(5)) + ",NQ,,,,\n")),
            f + ": column 'k', row 11: empty in a future row of symbol 'NQ' (its close is empty): a forecast needs "
                "the known inputs of the bars ahead");
  // A bar after the future rows.
  EXPECT_EQ(refused(future_csv(1, format_utc(bar_time(9)) + ",ES,109,10,9,90\n")),
            f + ": column 'close', row 12: a bar of symbol 'ES' after its future rows (row 6 has an empty close): "
                "future rows come after the last bar");
  // A future row not after the last bar.
  EXPECT_EQ(refused(future_csv(0, format_utc(bar_time(4)) + ",NQ,,,,40\n")),
            f + ": column 'timestamp', row 11: future row of symbol 'NQ' at " + format_utc(bar_time(4)) +
                " is not after " + format_utc(bar_time(4)) + ", row 10");
  // A bar column that is empty in a row with a close is still a missing value.
  EXPECT_THAT(refused(future_csv(1, format_utc(bar_time(5)) + ",NQ,205,,5,50\n")),
              HasSubstr("f.csv: column 'volume', row 12: null value"));
}

TEST(FutureRows, SeriesInMemoryAreValidatedLikeAFile) {
  BarSeries s;
  s.symbol = "ES";
  s.timestamp_ns = {bar_time(0), bar_time(1)};
  s.close = {100, 101};
  s.declared_known = {{0, 1}};
  s.future_timestamp_ns = {bar_time(2), bar_time(2)};
  s.future_known = {{2, 3}};
  EXPECT_THAT(test::error_message([&] { validate_series(s, "feed"); }),
              HasSubstr("feed: symbol 'ES': future row 2 (" + format_utc(bar_time(2)) + "): not after " +
                        format_utc(bar_time(2)) + ", the future row before"));
  s.future_timestamp_ns = {bar_time(2), bar_time(3)};
  s.future_known = {{2}};
  EXPECT_THAT(test::error_message([&] { validate_series(s, "feed"); }),
              HasSubstr("feed: symbol 'ES': a declared known input has 1 future values but 2 future timestamps"));
  s.future_known = {{2, std::nan("")}};
  EXPECT_THAT(test::error_message([&] { validate_series(s, "feed"); }),
              HasSubstr("future row 2 (" + format_utc(bar_time(3)) + "): declared known input 1 nan is not finite"));

  // Bars cannot follow future rows when a folder's files are joined.
  BarSeries later;
  later.timestamp_ns = {bar_time(4)};
  later.close = {104};
  later.declared_known = {{4}};
  EXPECT_THAT(test::error_message([&] { append_bars(s, later); }),
              HasSubstr("symbol 'ES': the bar at " + format_utc(bar_time(4)) + " follows its future rows"));
}

}  // namespace
}  // namespace qtft::data
