// A backtest's forecast table written a part at a time: the same rows as written at once,
// parts joined in order, and nothing at the final path until the writer commits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "qtft/data/bars/backtest_forecasts.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

using ::testing::HasSubstr;

// `n` rows of fold `fold`, every value distinct, so that a row out of place shows.
BacktestForecasts rows_of(int32_t fold, int n, std::vector<double> quantiles = {0.1, 0.5, 0.9}) {
  BacktestForecasts f;
  f.quantiles = std::move(quantiles);
  f.value.resize(f.quantiles.size());
  for (int i = 0; i < n; ++i) {
    f.fold.push_back(fold);
    f.symbol.push_back(i % 3 == 0 ? "ES" : "NQ");
    f.origin_ns.push_back(1'000'000'000LL * i);
    f.timestamp_ns.push_back(1'000'000'000LL * i + 60'000'000'000LL);
    f.step.push_back(1 + i % 8);
    for (size_t q = 0; q < f.quantiles.size(); ++q)
      f.value[q].push_back(fold * 1e6 + i + 0.25 * static_cast<double>(q));
    f.realized.push_back(-0.5 * i);
  }
  return f;
}

void append(BacktestForecasts& to, const BacktestForecasts& from) {
  to.fold.insert(to.fold.end(), from.fold.begin(), from.fold.end());
  to.symbol.insert(to.symbol.end(), from.symbol.begin(), from.symbol.end());
  to.origin_ns.insert(to.origin_ns.end(), from.origin_ns.begin(), from.origin_ns.end());
  to.timestamp_ns.insert(to.timestamp_ns.end(), from.timestamp_ns.begin(), from.timestamp_ns.end());
  to.step.insert(to.step.end(), from.step.begin(), from.step.end());
  for (size_t q = 0; q < from.value.size(); ++q)
    to.value[q].insert(to.value[q].end(), from.value[q].begin(), from.value[q].end());
  to.realized.insert(to.realized.end(), from.realized.begin(), from.realized.end());
}

void expect_same_rows(const BacktestForecasts& a, const BacktestForecasts& b) {
  EXPECT_EQ(a.quantiles, b.quantiles);
  EXPECT_EQ(a.fold, b.fold);
  EXPECT_EQ(a.symbol, b.symbol);
  EXPECT_EQ(a.origin_ns, b.origin_ns);
  EXPECT_EQ(a.timestamp_ns, b.timestamp_ns);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.value, b.value);
  EXPECT_EQ(a.realized, b.realized);
}

TEST(BacktestForecasts, WrittenInPartsReadsAsWrittenAtOnce) {
  test::TempDir dir;
  // Parts larger and smaller than a row group (64Ki rows), and an empty one.
  const auto first = rows_of(0, 70'000), empty = rows_of(0, 0), last = rows_of(0, 123);
  BacktestForecastWriter writer(dir.file("parts.parquet"), first.quantiles);
  writer.write(first);
  writer.write(empty);
  writer.write(last);
  EXPECT_FALSE(std::filesystem::exists(dir.file("parts.parquet")));
  writer.commit();
  auto whole = first;
  append(whole, last);
  write_backtest_forecasts(whole, dir.file("whole.parquet"));
  expect_same_rows(read_backtest_forecasts(dir.file("parts.parquet")), whole);
  expect_same_rows(read_backtest_forecasts(dir.file("whole.parquet")), whole);
}

TEST(BacktestForecasts, PartsJoinInOrder) {
  test::TempDir dir;
  const auto a = rows_of(0, 70'000), b = rows_of(1, 5), c = rows_of(2, 1'000);
  write_backtest_forecasts(a, dir.file("a.parquet"));
  write_backtest_forecasts(b, dir.file("b.parquet"));
  write_backtest_forecasts(c, dir.file("c.parquet"));
  concatenate_backtest_forecasts({dir.file("a.parquet"), dir.file("b.parquet"), dir.file("c.parquet")},
                                 dir.file("all.parquet"));
  auto all = a;
  append(all, b);
  append(all, c);
  expect_same_rows(read_backtest_forecasts(dir.file("all.parquet")), all);
}

TEST(BacktestForecasts, PartsOfOtherQuantilesNameTheFileAndLeaveNothing) {
  test::TempDir dir;
  write_backtest_forecasts(rows_of(0, 10), dir.file("a.parquet"));
  write_backtest_forecasts(rows_of(1, 10, {0.05, 0.5, 0.95}), dir.file("b.parquet"));
  const auto message = test::error_message([&] {
    concatenate_backtest_forecasts({dir.file("a.parquet"), dir.file("b.parquet")}, dir.file("all.parquet"));
  });
  EXPECT_THAT(message, HasSubstr(dir.file("all.parquet")));
  EXPECT_THAT(message, HasSubstr("q0.05"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 2);  // a and b: no temporary
}

TEST(BacktestForecasts, AWriterAbandonedLeavesNothing) {
  test::TempDir dir;
  {
    BacktestForecastWriter writer(dir.file("f.parquet"), {0.1, 0.5, 0.9});
    writer.write(rows_of(0, 100));
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  BacktestForecastWriter writer(dir.file("f.parquet"), {0.1, 0.5, 0.9});
  const auto message = test::error_message([&] { writer.write(rows_of(0, 1, {0.5})); });
  EXPECT_THAT(message,
              HasSubstr(dir.file("f.parquet") + ": forecast rows of quantiles q0.5 for a file of q0.1, q0.5, q0.9"));
}

}  // namespace
}  // namespace qtft::data
