// What a forecast reads of one Parquet file: each series' last bars, from the row groups that
// hold them only (the symbol and close columns of every group say which), so that a desk's
// export of years costs its last groups; flags that contradict the file's columns are
// refused from the footer, before any data is read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arrow/table.h>

#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/synthetic.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

using ::testing::HasSubstr;

// Bars [begin, end) of every series that has them.
BarSet slice(const BarSet& bars, size_t begin, size_t end) {
  BarSet out = bars;
  out.series.clear();
  for (const auto& s : bars.series) {
    if (begin < s.size()) out.series.push_back(slice_bars(s, begin, std::min(end, s.size())));
  }
  return out;
}

// The bars written in time slices of `rows_per_slice` bars per series, each slice its own
// row group(s): the layout of an export appended to day after day.
void write_in_slices(const BarSet& bars, size_t rows_per_slice, const std::string& path) {
  ParquetTableWriter writer(path, bars_to_table(slice(bars, 0, 1))->schema());
  for (size_t begin = 0; begin < bars.series.front().size(); begin += rows_per_slice) {
    writer.write(*bars_to_table(slice(bars, begin, begin + rows_per_slice)));
  }
  writer.commit();
}

BarSet three_symbols() {
  SyntheticOptions options;
  options.rows = 3'000;
  options.symbols = 3;
  return generate_synthetic_bars(options);
}

void expect_same_bars(const BarSet& got, const BarSet& want) {
  ASSERT_EQ(got.series.size(), want.series.size());
  for (size_t i = 0; i < got.series.size(); ++i) {
    EXPECT_EQ(got.series[i].symbol, want.series[i].symbol);
    EXPECT_EQ(got.series[i].timestamp_ns, want.series[i].timestamp_ns) << got.series[i].symbol;
    EXPECT_EQ(got.series[i].close, want.series[i].close) << got.series[i].symbol;
    EXPECT_EQ(got.series[i].volume, want.series[i].volume) << got.series[i].symbol;
  }
}

BarSet last_bars_of_whole_file(const std::string& path, size_t keep) {
  BarSet bars = read_bars_parquet(path);
  for (auto& s : bars.series) keep_last_bars(s, keep);
  return bars;
}

TEST(LatestBars, ReadOnlyTheRowGroupsHoldingEachSeriesLastBars) {
  test::TempDir dir;
  const auto path = dir.file("export.parquet");
  BarSet bars = three_symbols();
  write_in_slices(bars, 100, path);
  const auto want = last_bars_of_whole_file(path, 150);
  expect_same_bars(read_latest_bars_parquet(path, {}, 150), want);

  // A bad bar long before the last ones is not read: the same file with it still forecasts,
  // though reading it whole is refused.
  bars.series[1].close[20] = -1.0;
  const auto damaged = dir.file("damaged.parquet");
  write_in_slices(bars, 100, damaged);
  EXPECT_THAT(test::error_message([&] { read_bars_parquet(damaged); }), HasSubstr("close"));
  expect_same_bars(read_latest_bars_parquet(damaged, {}, 150), want);
  BarSource source;
  source.parquet_file = damaged;
  expect_same_bars(load_latest_bars(source, 150), want);
}

// An export written symbol after symbol: each series' last groups lie in the middle of the
// file, and the groups between them are skipped; the series keep the whole file's order.
TEST(LatestBars, AFileWrittenSeriesAfterSeriesSkipsEachSeriesOlderGroups) {
  test::TempDir dir;
  BarSet bars = three_symbols();
  bars.series[0].close[20] = -1.0;  // read, this bar is refused
  const auto path = dir.file("by_symbol.parquet");
  {
    ParquetTableWriter writer(path, bars_to_table(slice(bars, 0, 1))->schema());
    for (const auto& s : bars.series) {
      BarSet one = bars;
      one.series = {s};
      for (size_t begin = 0; begin < s.size(); begin += 100)
        writer.write(*bars_to_table(slice(one, begin, begin + 100)));
    }
    writer.commit();
  }
  EXPECT_THAT(test::error_message([&] { read_bars_parquet(path); }), HasSubstr("close"));
  BarSet want = three_symbols();
  for (auto& s : want.series) keep_last_bars(s, 150);
  const auto got = read_latest_bars_parquet(path, {}, 150);
  expect_same_bars(got, want);
}

// A series that starts late is second in the file, yet first in the last groups' rows: the
// series keep the whole file's order all the same.
TEST(LatestBars, TheSeriesKeepTheWholeFilesOrder) {
  test::TempDir dir;
  const BarSet bars = three_symbols();
  const auto path = dir.file("late.parquet");
  {
    ParquetTableWriter writer(path, bars_to_table(slice(bars, 0, 1))->schema());
    for (size_t k = 0; k < 10; ++k) {
      BarSet part = slice(bars, k * 100, (k + 1) * 100);  // S0, S1, S2 in each group
      part.series.pop_back();
      if (k < 5) part.series.erase(part.series.begin());  // S0 only from group 5 on
      writer.write(*bars_to_table(part));
    }
    writer.commit();
  }
  const auto whole = last_bars_of_whole_file(path, 150);
  ASSERT_EQ(whole.series.size(), 2u);
  EXPECT_EQ(whole.series[0].symbol, bars.series[1].symbol);
  expect_same_bars(read_latest_bars_parquet(path, {}, 150), whole);
}

TEST(LatestBars, ASeriesThatEndedEarlyIsStillRead) {
  test::TempDir dir;
  const auto path = dir.file("export.parquet");
  BarSet bars = three_symbols();
  bars.series[2] = slice_bars(bars.series[2], 0, 200);  // its first 200 bars only, in the first groups
  write_in_slices(bars, 100, path);
  const auto got = read_latest_bars_parquet(path, {}, 150);
  expect_same_bars(got, last_bars_of_whole_file(path, 150));
  EXPECT_EQ(got.series.at(2).size(), 150u);
}

TEST(LatestBars, AFlagTheFileContradictsIsRefusedBeforeReading) {
  test::TempDir dir;
  const auto path = dir.file("export.parquet");
  write_in_slices(three_symbols(), 100, path);
  BarReadOptions options;
  options.symbol = "ES";
  EXPECT_EQ(test::error_message([&] { read_latest_bars_parquet(path, options, 10); }),
            path + ": has a symbol column 'symbol'; --symbol ES names the series of files without one");
}

}  // namespace
}  // namespace qtft::data
