// Folders of Parquet files: Hive partitions supply the symbol, files join per symbol in path
// order, and every kind of bad file is refused with its name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arrow/api.h>

#include <filesystem>
#include <fstream>

#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/bars/synthetic.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Hourly bars: a few thousand per symbol span several years, so several files each.
SyntheticOptions several_years() {
  SyntheticOptions o;
  o.rows = 12'000;
  o.symbols = 3;
  o.bar_minutes = 60;
  return o;
}

const BarSeries& series_named(const BarSet& bars, const std::string& symbol) {
  for (const auto& s : bars.series) {
    if (s.symbol == symbol) return s;
  }
  throw std::runtime_error("no series " + symbol);
}

class ParquetDataset : public ::testing::Test {
 protected:
  void SetUp() override {
    bars_ = generate_synthetic_bars(several_years());
    folder_ = dir_.file("bars");
    files_ = write_parquet_partitions(bars_, folder_);
  }
  // The files of one symbol's partition (all of them: ""), in path order.
  std::vector<fs::path> files_of(const std::string& symbol) const {
    std::vector<fs::path> out;
    const auto root = symbol.empty() ? fs::path(folder_) : fs::path(folder_) / ("symbol=" + symbol);
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (e.is_regular_file()) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
  }
  test::TempDir dir_;
  BarSet bars_;
  std::string folder_;
  size_t files_ = 0;
};

TEST_F(ParquetDataset, PartitionsNameTheSymbolAndFilesJoinIntoTheSeriesWritten) {
  EXPECT_GE(files_, 3 * 3u);  // several years per symbol
  const BarSet read = read_bars_parquet_dataset(folder_, {});
  ASSERT_EQ(read.series.size(), bars_.series.size());
  EXPECT_EQ(read.fields, BarFields::all());
  for (const auto& written : bars_.series) {
    const auto& s = series_named(read, written.symbol);
    EXPECT_EQ(s.timestamp_ns, written.timestamp_ns) << written.symbol;
    EXPECT_EQ(s.open, written.open);
    EXPECT_EQ(s.high, written.high);
    EXPECT_EQ(s.low, written.low);
    EXPECT_EQ(s.close, written.close);
    EXPECT_EQ(s.volume, written.volume);
  }
  // Every command reads a folder through load_bars.
  BarSource source;
  source.parquet_file = folder_;
  EXPECT_EQ(load_bars(source).total_rows(), bars_.total_rows());
  // A forecast's last bars, kept file by file, are the last bars of the whole series.
  const BarSet latest = load_latest_bars(source, 10);
  for (const auto& written : bars_.series) {
    const auto& s = series_named(latest, written.symbol);
    ASSERT_EQ(s.size(), 10u);
    EXPECT_EQ(s.timestamp_ns.back(), written.timestamp_ns.back());
    EXPECT_EQ(s.close.front(), written.close[written.size() - 10]);
  }
}

// A cut read skips the files whose footer statistics place them outside the cut: a symbol's
// files of another schema, decades later, would be refused if read (as the whole folder's
// read shows), yet the cut reads as the whole folder's bars cut in memory.
TEST_F(ParquetDataset, ACutReadSkipsTheFilesItsFooterPlacesOutside) {
  BarSet later = generate_synthetic_symbol(several_years(), 0);
  later.series[0].symbol = "ZZ";
  later.fields = {};
  later.fields.add(BarField::OpenHighLow);
  later.series[0].volume.clear();
  for (auto& t : later.series[0].timestamp_ns) t += 40LL * 365 * 86'400 * 1'000'000'000;
  write_parquet_partitions(later, folder_);
  BarSource whole;
  whole.parquet_file = folder_;
  EXPECT_THAT(test::error_message([&] { load_bars(whole); }), HasSubstr("has no column 'volume'"));

  const auto& first = bars_.series[0];
  BarSource cut = whole;
  cut.from_ns = first.timestamp_ns[first.size() / 3];
  cut.through_ns = first.timestamp_ns[first.size() / 2];
  BarSet expected = bars_;
  cut_bars(expected, cut);
  const auto expect_expected = [&](const BarSet& read) {
    ASSERT_EQ(read.series.size(), expected.series.size());
    for (const auto& s : expected.series) {
      EXPECT_EQ(series_named(read, s.symbol).timestamp_ns, s.timestamp_ns) << s.symbol;
      EXPECT_EQ(series_named(read, s.symbol).close, s.close) << s.symbol;
    }
  };
  expect_expected(load_bars(cut));
  EXPECT_EQ(read_source_clock(cut).timeline, clock_of(expected).timeline);
  BarSet parts;
  for_each_bar_part(cut, [&](const BarSet& part) {
    for (const auto& s : part.series) {
      auto named = std::find_if(parts.series.begin(), parts.series.end(),
                                [&](const BarSeries& p) { return p.symbol == s.symbol; });
      if (named == parts.series.end()) {
        parts.series.push_back(s);
      } else {
        append_bars(*named, s);
      }
    }
  });
  expect_expected(parts);

  // Per series: a symbol not listed is not read at all.
  BarSource one = whole;
  one.series_from_ns = {{first.symbol, first.timestamp_ns[10]}};
  const auto read = load_bars(one);
  ASSERT_EQ(read.series.size(), 1u);
  EXPECT_EQ(read.series[0].size(), first.size() - 10);

  // Declared inputs carry from file to file: every file is read then.
  BarReadOptions declared;
  declared.inputs.observed = {"volume"};
  DatasetReader reader(folder_, declared);
  for (size_t k = 0; k < reader.files().size(); ++k) {
    EXPECT_TRUE(reader.may_hold_bars_between(k, cut.from_ns, cut.through_ns)) << reader.files()[k].path;
  }
}

TEST_F(ParquetDataset, AnEmptyFolderIsRefused) {
  const auto empty = dir_.file("empty");
  fs::create_directories(empty);
  EXPECT_THAT(test::error_message([&] { read_bars_parquet_dataset(empty, {}); }),
              HasSubstr(empty + ": the folder holds no Parquet files"));
}

TEST_F(ParquetDataset, AFileWithOtherColumnsIsRefusedByName) {
  BarSet odd = generate_synthetic_symbol(several_years(), 0);
  odd.series[0].symbol = "ZZ";
  odd.fields = {};
  odd.fields.add(BarField::OpenHighLow);
  odd.series[0].volume.clear();
  write_parquet_partitions(odd, folder_);
  const auto message = test::error_message([&] { read_bars_parquet_dataset(folder_, {}); });
  EXPECT_THAT(message, HasSubstr("symbol=ZZ/year="));
  EXPECT_THAT(message, HasSubstr("has no column 'volume'"));
}

TEST_F(ParquetDataset, AColumnOfAnotherTypeIsRefusedByName) {
  const auto victim = files_of("").back();  // not the first file, whose schema is the rule
  auto table = read_parquet_table(victim.string());
  const int index = table->schema()->GetFieldIndex("close");
  arrow::FloatBuilder floats;
  for (const auto& chunk : table->column(index)->chunks()) {
    const auto& doubles = static_cast<const arrow::DoubleArray&>(*chunk);
    for (int64_t i = 0; i < doubles.length(); ++i)
      ASSERT_TRUE(floats.Append(static_cast<float>(doubles.Value(i))).ok());
  }
  auto column = std::make_shared<arrow::ChunkedArray>(floats.Finish().ValueOrDie());
  table = table->SetColumn(index, arrow::field("close", arrow::float32()), column).ValueOrDie();
  write_parquet_table(*table, victim.string());
  const auto message = test::error_message([&] { read_bars_parquet_dataset(folder_, {}); });
  EXPECT_THAT(message, HasSubstr(victim.string() + ": column 'close' has type float, not double"));
}

TEST_F(ParquetDataset, TruncatedAndNonParquetFilesAreRefusedByName) {
  const auto victim = files_of(bars_.series[0].symbol).back();
  fs::resize_file(victim, fs::file_size(victim) / 2);
  EXPECT_THAT(test::error_message([&] { read_bars_parquet_dataset(folder_, {}); }),
              HasSubstr(victim.string() + ": not a valid Parquet file"));

  const auto other = dir_.file("other");
  write_parquet_partitions(generate_synthetic_symbol(several_years(), 0), other);
  std::ofstream(fs::path(other) / "notes.txt") << "not bars\n";
  EXPECT_THAT(test::error_message([&] { read_bars_parquet_dataset(other, {}); }),
              HasSubstr(other + "/notes.txt: not a valid Parquet file"));
  // Names starting with '_' or '.' are Arrow's (and qtft's) own: skipped.
  fs::remove(fs::path(other) / "notes.txt");
  std::ofstream(fs::path(other) / "_SUCCESS") << "";
  EXPECT_NO_THROW(read_bars_parquet_dataset(other, {}));
}

TEST_F(ParquetDataset, APartitionValueThatIsNotASymbolIsRefused) {
  const auto files = files_of(bars_.series[0].symbol);
  for (const std::string bad : {"__HIVE_DEFAULT_PARTITION__", ""}) {
    const auto folder = dir_.file("bad" + std::to_string(bad.size()));
    fs::create_directories(fs::path(folder) / ("symbol=" + bad));
    fs::copy_file(files.front(), fs::path(folder) / ("symbol=" + bad) / "part-0.parquet");
    EXPECT_THAT(test::error_message([&] { read_bars_parquet_dataset(folder, {}); }),
                HasSubstr("partition key symbol=" + (bad.empty() ? std::string() : bad) + " is not a valid symbol"))
        << bad;
  }
}

TEST_F(ParquetDataset, FilesWhoseBarsOverlapAreRefused) {
  const auto files = files_of(bars_.series[0].symbol);
  // A copy of the first year, in a folder that sorts after the last year.
  const auto copy = fs::path(folder_) / ("symbol=" + bars_.series[0].symbol) / "year=9999";
  fs::create_directories(copy);
  fs::copy_file(files.front(), copy / "part-0.parquet");
  const auto message = test::error_message([&] { read_bars_parquet_dataset(folder_, {}); });
  EXPECT_THAT(message,
              HasSubstr((copy / "part-0.parquet").string() + ": symbol '" + bars_.series[0].symbol + "' starts at"));
  EXPECT_THAT(message, HasSubstr("not after its last bar so far"));
}

}  // namespace
}  // namespace qtft::data
