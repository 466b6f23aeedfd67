// The feature store: bitwise the in-memory dataset, reused only when built from the same
// files and options, and never used when incomplete.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/bars/synthetic.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/store/detail/feature_store_parts.h"
#include "qtft/data/store/feature_store.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

SyntheticOptions several_years() {
  SyntheticOptions o;
  o.rows = 9'000;
  o.symbols = 3;
  o.bar_minutes = 60;
  return o;
}

DatasetOptions small_windows() {
  DatasetOptions o;
  o.encoder_length = 24;
  o.horizon = 4;
  return o;
}

template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

void expect_bitwise_equal(const Dataset& a, const Dataset& b) {
  EXPECT_EQ(to_json(a.schema()).dump(), to_json(b.schema()).dump());
  for (Split split : kAllSplits) EXPECT_EQ(a.num_windows(split), b.num_windows(split)) << split_name(split);
  ASSERT_EQ(a.series().size(), b.series().size());
  for (size_t i = 0; i < a.series().size(); ++i) {
    const auto &x = a.series()[i], &y = b.series()[i];
    EXPECT_EQ(x.symbol, y.symbol);
    EXPECT_EQ(x.symbol_id, y.symbol_id);
    EXPECT_EQ(x.split_bounds, y.split_bounds);
    EXPECT_EQ(x.first_bar_ns, y.first_bar_ns);
    EXPECT_TRUE(same_bits(x.timestamp_ns, y.timestamp_ns)) << x.symbol;
    EXPECT_TRUE(same_bits(x.close, y.close)) << x.symbol;
    EXPECT_TRUE(same_bits(x.observed, y.observed)) << x.symbol;
    EXPECT_TRUE(same_bits(x.known, y.known)) << x.symbol;
    EXPECT_TRUE(same_bits(x.target, y.target)) << x.symbol;
    EXPECT_TRUE(same_bits(x.statics, y.statics)) << x.symbol;
  }
  EXPECT_EQ(a.notes().unknown_category_rows, b.notes().unknown_category_rows);
}

size_t stores_in(const std::string& folder) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(folder)) n += e.path().extension() == ".qtfs";
  return n;
}

class FeatureStore : public ::testing::Test {
 protected:
  void SetUp() override {
    source_.parquet_file = dir_.file("bars");
    write_parquet_partitions(generate_synthetic_bars(several_years()), source_.parquet_file);
  }
  Dataset in_memory() const { return Dataset::build(load_bars(source_), small_windows()); }
  test::TempDir dir_;
  BarSource source_;
};

TEST_F(FeatureStore, AFolderIsServedFromItsStoreBitwiseAsFromMemory) {
  EXPECT_EQ(source_.feature_store_folder(), source_.parquet_file + "/_qtft_store");
  StorePreparation seen;
  const Dataset stored = open_dataset(source_, small_windows(), nullptr, StoreAccess::BuildIfNeeded,
                                      [&](const StorePreparation& p) { seen = p; });
  EXPECT_TRUE(seen.built);
  EXPECT_EQ(seen.bars, 9'000);
  EXPECT_EQ(seen.series, 3);
  EXPECT_TRUE(fs::exists(seen.path));
  expect_bitwise_equal(stored, in_memory());

  // A model's saved spec that is the store's own is served by the same store.
  const InputSchema spec = stored.schema();
  const auto again = prepare_feature_store(source_, small_windows(), &spec);
  EXPECT_FALSE(again.built);
  EXPECT_EQ(again.path, seen.path);
  expect_bitwise_equal(map_feature_store(again.path, small_windows()),
                       Dataset::build(load_bars(source_), small_windows(), spec));
}

TEST_F(FeatureStore, ASingleFileWithAStoreFolderToo) {
  BarSource csv;
  csv.csv_file = dir_.write("bars.csv", test::regular_bars_csv(400));
  csv.feature_store = dir_.file("store");
  expect_bitwise_equal(open_dataset(csv, small_windows(), nullptr), Dataset::build(load_bars(csv), small_windows()));
  // Another spec than its own (a model trained elsewhere) gets a store of its own.
  InputSchema other = Dataset::build(load_bars(csv), small_windows()).schema();
  other.target_scale *= 2;
  const auto applied = prepare_feature_store(csv, small_windows(), &other);
  EXPECT_TRUE(applied.built);
  expect_bitwise_equal(map_feature_store(applied.path, small_windows()),
                       Dataset::build(load_bars(csv), small_windows(), other));
  EXPECT_EQ(stores_in(csv.feature_store), 2u);
}

TEST_F(FeatureStore, AStoreFolderInsideTheDatasetIsNotReadAsData) {
  BarSource inside = source_;
  inside.feature_store = source_.parquet_file + "/stores";
  const auto built = prepare_feature_store(inside, small_windows(), nullptr);
  EXPECT_TRUE(built.built);
  EXPECT_FALSE(prepare_feature_store(inside, small_windows(), nullptr).built);
  expect_bitwise_equal(map_feature_store(built.path, small_windows()), in_memory());
}

TEST_F(FeatureStore, ReusedOnlyForTheSameFilesAndOptions) {
  const auto first = prepare_feature_store(source_, small_windows(), nullptr);
  EXPECT_TRUE(first.built);
  EXPECT_THAT(first.reason, HasSubstr("no store yet"));
  const auto reused = prepare_feature_store(source_, small_windows(), nullptr);
  EXPECT_FALSE(reused.built);
  EXPECT_EQ(reused.path, first.path);

  // Other windows read the same rows: one store serves them (the trials of qtft tune).
  DatasetOptions longer = small_windows();
  longer.encoder_length = 32;
  longer.horizon = 5;
  const auto other_windows = prepare_feature_store(source_, longer, nullptr);
  EXPECT_FALSE(other_windows.built);
  EXPECT_EQ(other_windows.path, first.path);
  const Dataset windowed = map_feature_store(other_windows.path, longer);
  EXPECT_EQ(windowed.options().encoder_length, 32);
  expect_bitwise_equal(windowed, Dataset::build(load_bars(source_), longer));
  // Other splits fit the inputs on other training rows: another store, and the first
  // cannot be windowed with them.
  DatasetOptions later_validation = small_windows();
  later_validation.validation_fraction = 0.1;
  const auto other_splits = prepare_feature_store(source_, later_validation, nullptr);
  EXPECT_TRUE(other_splits.built);
  EXPECT_NE(other_splits.path, first.path);
  EXPECT_THAT(other_splits.reason, HasSubstr("was built with other options"));
  EXPECT_THAT(test::error_message([&] { map_feature_store(first.path, later_validation); }),
              HasSubstr(first.path + ": the feature store was built for the splits"));

  // Bars appended later, as a new file: detected, never ignored.
  BarSet more = generate_synthetic_symbol(several_years(), 0);
  more.series[0].symbol = "ZZ";
  write_parquet_partitions(more, source_.parquet_file);
  const auto appended = prepare_feature_store(source_, small_windows(), nullptr);
  EXPECT_TRUE(appended.built);
  EXPECT_THAT(appended.reason, HasSubstr("the source's files changed"));
  EXPECT_THAT(appended.reason, HasSubstr("added"));
  EXPECT_EQ(appended.series, 4);
  expect_bitwise_equal(map_feature_store(appended.path, small_windows()), in_memory());
}

TEST_F(FeatureStore, AStoreOfAnOlderFormatIsRebuiltSayingSo) {
  const auto store = prepare_feature_store(source_, small_windows(), nullptr);
  // The same file as an older qtft would have written its index (format 2).
  std::string bytes;
  {
    std::ifstream in(store.path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string now = "\"version\":3", before = "\"version\":2";
  size_t patched = 0;
  for (size_t at = bytes.find(now); at != std::string::npos; at = bytes.find(now, at)) {
    bytes.replace(at, now.size(), before);
    ++patched;
  }
  ASSERT_EQ(patched, 2u);  // the index's and its fingerprint's
  std::ofstream(store.path, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_THAT(test::error_message([&] { map_feature_store(store.path, small_windows()); }),
              HasSubstr(store.path + ": a feature store of format 2, this qtft reads 3"));
  EXPECT_FALSE(find_feature_store(source_, small_windows(), nullptr).has_value());
  const auto rebuilt = prepare_feature_store(source_, small_windows(), nullptr);
  EXPECT_TRUE(rebuilt.built);
  EXPECT_THAT(rebuilt.reason, HasSubstr("is of store format 2, this qtft's is 3"));
  ASSERT_TRUE(find_feature_store(source_, small_windows(), nullptr).has_value());
  EXPECT_EQ(find_feature_store(source_, small_windows(), nullptr)->path, rebuilt.path);
}

TEST_F(FeatureStore, WaitingRanksNeverBuild) {
  EXPECT_THAT(
      test::error_message([&] { prepare_feature_store(source_, small_windows(), nullptr, StoreAccess::MustExist); }),
      HasSubstr("the feature store is missing"));
  EXPECT_FALSE(fs::exists(source_.feature_store_folder()));
}

TEST_F(FeatureStore, AnIncompleteStoreIsNeverUsed) {
  const auto store = prepare_feature_store(source_, small_windows(), nullptr);
  // A writer killed mid-file leaves only its temporary, under another name: not a store.
  std::ofstream(fs::path(source_.feature_store_folder()) / ".abc.qtfs.tmp-999999999-0") << "half";
  EXPECT_FALSE(prepare_feature_store(source_, small_windows(), nullptr).built);
  // A store cut short (a disk that failed under it) is refused with its name, not read.
  fs::resize_file(store.path, fs::file_size(store.path) - 100);
  EXPECT_THAT(test::error_message([&] { prepare_feature_store(source_, small_windows(), nullptr); }),
              HasSubstr(store.path + ": not a complete qtft feature store"));
  fs::resize_file(store.path, 10);
  EXPECT_THAT(test::error_message([&] { map_feature_store(store.path, small_windows()); }),
              HasSubstr("not a complete qtft feature store"));
}

TEST_F(FeatureStore, SourcesWithoutAStoreFolderAreComputedInMemory) {
  BarSource embedded;
  EXPECT_EQ(embedded.feature_store_folder(), "");
  BarSource folder_in_memory = source_;
  folder_in_memory.in_memory = true;
  EXPECT_EQ(folder_in_memory.feature_store_folder(), "");
  expect_bitwise_equal(open_dataset(folder_in_memory, small_windows(), nullptr), in_memory());
  EXPECT_FALSE(fs::exists(source_.feature_store_folder()));
  EXPECT_THAT(test::error_message([&] { prepare_feature_store(embedded, small_windows(), nullptr); }),
              HasSubstr("no feature store for embedded synthetic data"));
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A long series of wide inputs is featurized part by part, so that memory follows a part.
// Parts of one row, of 7 rows (across the folder's files, whose chunks do not line up with
// them) and of the default size give the same file, byte for byte: every input kind, a
// target column of its own, per-series statistics and a calendar zone, as the in-memory
// dataset has them.
TEST(FeatureStoreParts, AStoreBuiltAFewRowsAtATimeIsTheSameFile) {
  test::TempDir dir;
  SyntheticOptions bars = several_years();
  bars.rows = 1'500;
  bars.extra_inputs = 6;
  BarSource source;
  source.parquet_file = dir.file("bars");
  write_parquet_partitions(generate_synthetic_bars(bars), source.parquet_file);
  source.read.inputs.observed = {"lead_signal", "f*"};
  source.read.inputs.known = {"event_flag"};
  source.read.inputs.static_categorical = {"vol_class"};
  source.read.inputs.target = {"f00", TargetTransform::None, Normalization::PerSeries};
  source.read.inputs.calendar_timezone = "America/Chicago";
  BarSource today;
  today.parquet_file = source.parquet_file;
  for (const BarSource& declared : {today, source}) {
    std::string whole;
    for (const uint64_t part_rows : {0, 1, 7}) {
      BarSource in_parts = declared;
      in_parts.feature_store = dir.file("store-" + std::to_string(part_rows));
      const auto built = detail::prepare_feature_store_in_parts(in_parts, small_windows(), nullptr, part_rows);
      ASSERT_TRUE(built.built);
      EXPECT_EQ(built.bars, 1'500);
      if (part_rows == 0) {
        whole = file_bytes(built.path);
        BarSource in_memory = declared;
        in_memory.in_memory = true;
        expect_bitwise_equal(map_feature_store(built.path, small_windows()),
                             open_dataset(in_memory, small_windows(), nullptr));
      } else {
        EXPECT_TRUE(file_bytes(built.path) == whole) << part_rows << "-row parts";
      }
    }
  }
}

// Files longer than a record batch (64Ki rows) are read a batch at a time, a folder's as a
// single file's: the series and their declared inputs continue across the batches.
TEST(FeatureStoreParts, FilesLongerThanABatchGiveTheDatasetOfMemory) {
  test::TempDir dir;
  SyntheticOptions bars;
  bars.rows = 150'000;
  bars.symbols = 2;
  bars.bar_minutes = 1;
  bars.extra_inputs = 4;
  const BarSet generated = generate_synthetic_bars(bars);
  BarSource folder;
  folder.parquet_file = dir.file("bars");
  write_parquet_partitions(generated, folder.parquet_file);
  BarSource file;
  file.parquet_file = dir.file("bars.parquet");
  write_parquet_table(*bars_to_table(generated), file.parquet_file);
  file.feature_store = dir.file("store");
  for (BarSource source : {folder, file}) {
    source.read.inputs.observed = {"lead_signal", "f*"};
    source.read.inputs.known = {"event_flag"};
    source.read.inputs.static_categorical = {"vol_class"};
    BarSource in_memory = source;
    in_memory.in_memory = true;
    expect_bitwise_equal(open_dataset(source, small_windows(), nullptr),
                         open_dataset(in_memory, small_windows(), nullptr));
  }
}

}  // namespace
}  // namespace qtft::data
