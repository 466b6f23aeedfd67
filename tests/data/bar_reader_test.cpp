// Reading bars from CSV and Parquet: every supported column type, and one test per
// validation rule, each checking that the message names the file, column, row and value.
#include <arrow/api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/bars.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

using test::error_message;
using test::TempDir;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1704184200;  // 2024-01-02T08:30:00Z in seconds

std::shared_ptr<arrow::Array> doubles(const std::vector<double>& v) {
  arrow::DoubleBuilder b;
  EXPECT_TRUE(b.AppendValues(v).ok());
  return b.Finish().ValueOrDie();
}

// A Parquet file with a timestamp column of the given Arrow type and values, a close column.
std::string write_parquet(const TempDir& dir, const std::string& name,
                          std::vector<std::shared_ptr<arrow::Field>> fields,
                          std::vector<std::shared_ptr<arrow::Array>> arrays) {
  auto table = arrow::Table::Make(arrow::schema(fields), arrays);
  auto path = dir.file(name);
  write_parquet_table(*table, path);
  return path;
}

TEST(BarReader, ReadsCsvWithIsoTimestamps) {
  TempDir dir;
  auto path = dir.write("bars.csv", test::regular_bars_csv(4));
  auto bars = read_bars_csv(path);
  ASSERT_EQ(bars.series.size(), 1u);
  const auto& s = bars.series[0];
  EXPECT_EQ(s.symbol, "ES");
  EXPECT_EQ(bars.fields, BarFields::all());
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.timestamp_ns[0], kT0 * 1'000'000'000);
  EXPECT_EQ(s.timestamp_ns[3], (kT0 + 900) * 1'000'000'000);
  EXPECT_EQ(s.close[2], 102.0);
  EXPECT_EQ(s.high[2], 103.0);
  EXPECT_EQ(s.low[2], 101.0);
  EXPECT_EQ(s.open[2], 101.5);
  EXPECT_EQ(s.volume[2], 1000.0);
}

TEST(BarReader, AcceptsEveryArrowTimestampUnit) {
  TempDir dir;
  const std::vector<std::pair<arrow::TimeUnit::type, int64_t>> units{{arrow::TimeUnit::SECOND, 1},
                                                                     {arrow::TimeUnit::MILLI, 1000},
                                                                     {arrow::TimeUnit::MICRO, 1'000'000},
                                                                     {arrow::TimeUnit::NANO, 1'000'000'000}};
  for (auto [unit, per_second] : units) {
    auto type = arrow::timestamp(unit, "UTC");
    arrow::TimestampBuilder ts(type, arrow::default_memory_pool());
    ASSERT_TRUE(ts.AppendValues({kT0 * per_second, (kT0 + 60) * per_second}).ok());
    auto path =
        write_parquet(dir, "u.parquet", {arrow::field("timestamp", type), arrow::field("close", arrow::float64())},
                      {ts.Finish().ValueOrDie(), doubles({1.5, 1.25})});
    auto bars = read_bars_parquet(path);
    ASSERT_EQ(bars.series[0].size(), 2u);
    EXPECT_EQ(bars.series[0].timestamp_ns[1], (kT0 + 60) * 1'000'000'000) << type->ToString();
    EXPECT_EQ(bars.fields, BarFields{});
  }
}

TEST(BarReader, ReadsEpochSecondsAndMilliseconds) {
  TempDir dir;
  auto seconds =
      dir.write("s.csv", "timestamp,close\n" + std::to_string(kT0) + ",10\n" + std::to_string(kT0 + 60) + ",11\n");
  auto millis = dir.write("ms.csv", "timestamp,close\n" + std::to_string(kT0 * 1000) + ",10\n" +
                                        std::to_string((kT0 + 60) * 1000) + ",11\n");
  EXPECT_EQ(read_bars_csv(seconds).series[0].timestamp_ns[0], kT0 * 1'000'000'000);
  EXPECT_EQ(read_bars_csv(millis).series[0].timestamp_ns[0], kT0 * 1'000'000'000);
  BarReadOptions as_ms;
  as_ms.epoch_unit = EpochUnit::Milliseconds;
  EXPECT_EQ(read_bars_csv(seconds, as_ms).series[0].timestamp_ns[0], kT0 * 1'000'000);
}

TEST(BarReader, AcceptsPriceOnlyDataWithoutVolume) {
  TempDir dir;
  auto path = dir.write("fx.csv", "timestamp,price\n2024-01-02T08:30:00Z,1.095\n2024-01-02T08:31:00Z,1.0951\n");
  auto bars = read_bars_csv(path);
  EXPECT_EQ(bars.fields, BarFields{});
  EXPECT_EQ(bars.series[0].close[1], 1.0951);
  EXPECT_EQ(bars.series[0].symbol, "fx");  // no symbol column: the file's stem
}

TEST(BarReader, GroupsInterleavedSymbolsInOrderOfFirstAppearance) {
  TempDir dir;
  auto path = dir.write("multi.csv",
                        "timestamp,symbol,close\n"
                        "2024-01-02T08:30:00Z,NQ,200\n"
                        "2024-01-02T08:30:00Z,ES,100\n"
                        "2024-01-02T08:35:00Z,NQ,201\n"
                        "2024-01-02T08:35:00Z,ES,101\n");
  auto bars = read_bars_csv(path);
  ASSERT_EQ(bars.series.size(), 2u);
  EXPECT_EQ(bars.series[0].symbol, "NQ");
  EXPECT_EQ(bars.series[0].close, (std::vector<double>{200, 201}));
  EXPECT_EQ(bars.series[1].symbol, "ES");
  EXPECT_EQ(bars.series[1].close, (std::vector<double>{100, 101}));
}

TEST(BarReader, ReadsDictionaryEncodedSymbolsAndCustomColumnNames) {
  TempDir dir;
  arrow::StringDictionaryBuilder sym;
  ASSERT_TRUE(sym.Append("CL").ok());
  ASSERT_TRUE(sym.Append("GC").ok());
  ASSERT_TRUE(sym.Append("CL").ok());
  arrow::Int64Builder ts;
  ASSERT_TRUE(ts.AppendValues({kT0, kT0, kT0 + 60}).ok());
  auto sym_array = sym.Finish().ValueOrDie();
  auto path = write_parquet(dir, "d.parquet",
                            {arrow::field("time", arrow::int64()), arrow::field("ticker", sym_array->type()),
                             arrow::field("last", arrow::float64())},
                            {ts.Finish().ValueOrDie(), sym_array, doubles({70, 2000, 71})});
  BarReadOptions options;
  options.columns.timestamp = "time";
  options.columns.symbol = "ticker";
  options.columns.close = "last";
  auto bars = read_bars_parquet(path, options);
  ASSERT_EQ(bars.series.size(), 2u);
  EXPECT_EQ(bars.series[0].symbol, "CL");
  EXPECT_EQ(bars.series[0].close, (std::vector<double>{70, 71}));
  EXPECT_EQ(bars.series[1].symbol, "GC");
}

// --- validation: one test per rule -------------------------------------------------

struct CsvCase {
  const char* name;
  const char* csv;
  std::vector<std::string> phrases;  // all must appear in the message
};

class BarValidation : public ::testing::TestWithParam<CsvCase> {};

TEST_P(BarValidation, RejectsWithAMessageNamingTheFault) {
  TempDir dir;
  auto path = dir.write("bad.csv", GetParam().csv);
  auto message = error_message([&] { read_bars_csv(path); });
  EXPECT_THAT(message, HasSubstr(path));
  for (const auto& phrase : GetParam().phrases) EXPECT_THAT(message, HasSubstr(phrase));
}

const char* kHeader = "timestamp,symbol,open,high,low,close,volume\n";

INSTANTIATE_TEST_SUITE_P(
    EveryRule, BarValidation,
    ::testing::Values(
        CsvCase{"MissingColumn",
                "timestamp,open,high,low\n2024-01-02T08:30:00Z,1,2,0.5\n",
                {"missing close (or price) column 'close'", "columns: timestamp, open, high, low"}},
        CsvCase{"MissingTimestamp", "time,close\n2024-01-02T08:30:00Z,1\n", {"missing timestamp column 'timestamp'"}},
        CsvCase{"MistypedPrice",
                "timestamp,close\n2024-01-02T08:30:00Z,abc\n",
                {"column 'close'", "has type string, expected a number"}},
        CsvCase{"MistypedTimestamp", "timestamp,close\n1.5,1\n2.5,2\n", {"column 'timestamp'", "has type double"}},
        CsvCase{"BadIsoText",
                "timestamp,close\n2024-01-02T08:30:00Z,1\nyesterday,2\n",
                {"column 'timestamp'", "is not an ISO-8601 timestamp"}},
        CsvCase{"NullPrice",
                "timestamp,close\n2024-01-02T08:30:00Z,1\n2024-01-02T08:35:00Z,\n",
                {"column 'close', row 2: null value"}},
        CsvCase{"NaNPrice",
                "timestamp,close\n2024-01-02T08:30:00Z,1\n2024-01-02T08:35:00Z,nan\n",
                {"column 'close', row 2: value nan is not finite"}},
        CsvCase{"InfinitePrice",
                "timestamp,close\n2024-01-02T08:30:00Z,inf\n",
                {"column 'close', row 1: value inf is not finite"}},
        CsvCase{"NegativePrice",
                "timestamp,close\n2024-01-02T08:30:00Z,-3\n",
                {"column 'close', row 1: price -3 is not positive"}},
        CsvCase{"ZeroPrice",
                "timestamp,open,high,low,close\n2024-01-02T08:30:00Z,1,2,0,1\n",
                {"column 'low', row 1: price 0 is not positive"}},
        CsvCase{"HighBelowLow",
                "timestamp,symbol,open,high,low,close,volume\n2024-01-02T08:30:00Z,ES,100,101,99,100,5\n"
                "2024-01-02T08:35:00Z,ES,100,99.5,100.25,100,5\n",
                {"column 'high', row 2: high 99.5 is below low 100.25"}},
        CsvCase{"NegativeVolume",
                "timestamp,close,volume\n2024-01-02T08:30:00Z,1,-5\n",
                {"column 'volume', row 1: volume -5 is negative"}},
        CsvCase{
            "NaNVolume", "timestamp,close,volume\n2024-01-02T08:30:00Z,1,nan\n", {"column 'volume', row 1: value nan"}},
        CsvCase{"PartialRange",
                "timestamp,high,low,close\n2024-01-02T08:30:00Z,2,1,1.5\n",
                {"has only some of the columns 'open', 'high', 'low'"}},
        CsvCase{"Unsorted",
                "timestamp,symbol,close\n2024-01-02T08:35:00Z,ES,1\n2024-01-02T08:40:00Z,NQ,1\n"
                "2024-01-02T08:30:00Z,ES,1\n",
                {"column 'timestamp', row 3: unsorted timestamp 2024-01-02T08:30:00Z for symbol 'ES'",
                 "row 1 has 2024-01-02T08:35:00Z"}},
        CsvCase{"Duplicate",
                "timestamp,symbol,close\n2024-01-02T08:35:00Z,ES,1\n2024-01-02T08:35:00Z,ES,2\n",
                {"column 'timestamp', row 2: duplicate timestamp 2024-01-02T08:35:00Z for symbol 'ES'"}},
        CsvCase{"HeaderOnly", "timestamp,close\n", {"holds no rows"}},
        CsvCase{"YearOutOfRange",
                "timestamp,close\n2300-01-02T08:30:00Z,1\n",
                {"column 'timestamp', row 1", "outside the representable range (years 1677 to 2262)"}},
        CsvCase{
            "TwoCloseColumns", "timestamp,close,close\n2024-01-02T08:30:00Z,1,2\n", {"has 2 columns named 'close'"}},
        CsvCase{"TinyPrice",
                "timestamp,close\n2024-01-02T08:30:00Z,1e-320\n",
                {"column 'close', row 1: price 1e-320 is too small to be a price"}},
        CsvCase{"EmptySymbol",
                "timestamp,symbol,close\n2024-01-02T08:30:00Z,ES,1\n2024-01-02T08:35:00Z,,1\n",
                {"column 'symbol', row 2: empty symbol"}},
        CsvCase{"UnterminatedQuote",
                "timestamp,symbol,close\n2024-01-02T08:30:00Z,ES,4749.37\n2024-01-02T08:35:00Z,\"ES,4749.5\n"
                "2024-01-02T08:40:00Z,ES,4750\n2024-01-02T08:45:00Z,ES\",4751\n",
                {"column 'symbol', row 2", "is a quote left unterminated?"}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(BarValidation, SameTimestampInDifferentSymbolsIsFine) {
  TempDir dir;
  auto path = dir.write("ok.csv", "timestamp,symbol,close\n2024-01-02T08:30:00Z,ES,1\n2024-01-02T08:30:00Z,NQ,2\n");
  EXPECT_EQ(read_bars_csv(path).series.size(), 2u);
}

TEST(BarValidation, RejectsEmptyAndCorruptFiles) {
  TempDir dir;
  auto empty = dir.write("empty.parquet", "");
  EXPECT_THAT(error_message([&] { read_bars_parquet(empty); }), HasSubstr(empty + ": the file is empty"));
  auto corrupt = dir.write("corrupt.parquet", "PAR1 this is not really parquet at all PAR1");
  EXPECT_THAT(error_message([&] { read_bars_parquet(corrupt); }), HasSubstr(corrupt + ": not a valid Parquet file"));
  auto missing = dir.file("missing.csv");
  EXPECT_THAT(error_message([&] { read_bars_csv(missing); }), HasSubstr(missing + ": no such file"));
}

TEST(BarValidation, RejectsNullsInParquet) {
  TempDir dir;
  arrow::DoubleBuilder close;
  ASSERT_TRUE(close.Append(1.0).ok());
  ASSERT_TRUE(close.AppendNull().ok());
  arrow::Int64Builder ts;
  ASSERT_TRUE(ts.AppendValues({kT0, kT0 + 60}).ok());
  auto path = write_parquet(dir, "n.parquet",
                            {arrow::field("timestamp", arrow::int64()), arrow::field("close", arrow::float64())},
                            {ts.Finish().ValueOrDie(), close.Finish().ValueOrDie()});
  EXPECT_THAT(error_message([&] { read_bars_parquet(path); }), HasSubstr("column 'close', row 2: null value"));
}

TEST(BarWriter, ParquetAndCsvRoundTripExactly) {
  TempDir dir;
  auto bars = test::regular_bar_set(50, 2);
  write_bars_parquet(bars, dir.file("b.parquet"));
  write_bars_csv(bars, dir.file("b.csv"));
  for (const auto& back : {read_bars_parquet(dir.file("b.parquet")), read_bars_csv(dir.file("b.csv"))}) {
    ASSERT_EQ(back.series.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      EXPECT_EQ(back.series[s].symbol, bars.series[s].symbol);
      EXPECT_EQ(back.series[s].timestamp_ns, bars.series[s].timestamp_ns);
      EXPECT_EQ(back.series[s].close, bars.series[s].close);
      EXPECT_EQ(back.series[s].high, bars.series[s].high);
      EXPECT_EQ(back.series[s].volume, bars.series[s].volume);
    }
  }
}

}  // namespace
}  // namespace qtft::data
