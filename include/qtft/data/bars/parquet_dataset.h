#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "qtft/data/bars/bars.h"

namespace arrow {
class Schema;
class Table;
}  // namespace arrow

namespace qtft::data {

struct DeclaredCarry;

// One Parquet file of a dataset folder, as Arrow's dataset discovery found it.
struct DatasetFile {
  std::string path;
  int64_t size_bytes = 0;
  int64_t modified_ns = 0;
  // The value of a Hive partition key named like the symbol column (symbol=ES/...), if any.
  std::optional<std::string> partition_symbol;
};

// Every Parquet file below `directory` (recursively, in path order; names starting with '.'
// or '_' are skipped as Arrow skips them, which is where qtft keeps its feature stores, and
// so are feature stores themselves, *.qtfs), with
// Hive partition keys parsed from the folders. Throws qtft::Error for an empty folder or a
// symbol partition value that is not a valid symbol.
std::vector<DatasetFile> list_parquet_dataset(const std::string& directory, const BarReadOptions& options);

bool is_directory(const std::string& path);

// Reads a dataset folder file by file, in order: each file's bars, the symbol taken from the
// partition key when the file has no symbol column; a series' declared inputs continue from
// one file to the next (its warm-up of nulls is over, forward-fill carries across). Every file must have the first
// file's columns and types: another schema is an error naming both files.
class DatasetReader {
 public:
  DatasetReader(const std::string& directory, BarReadOptions options);
  const std::vector<DatasetFile>& files() const { return files_; }
  BarSet read(size_t k);
  // File k a record batch at a time, each batch's bars handed to `use` as a part of the
  // file: memory follows a batch (64Ki rows), not the file.
  void read_batches(size_t k, const std::function<void(const BarSet& part)>& use);
  // False when file k's footer shows that it holds no bar timed in [from_ns, through_ns]
  // (the timestamp column's statistics, read without the data) and skipping it changes
  // nothing else: the reading declares no inputs, whose forward-fill and categorical levels
  // carry from file to file. True when the footer cannot tell.
  bool may_hold_bars_between(size_t k, int64_t from_ns, int64_t through_ns) const;

 private:
  // Throws qtft::Error naming file k when its columns are not the first file's.
  void check_columns(size_t k, const std::shared_ptr<arrow::Schema>& schema);
  // Rows of file k (from `first_row` in it) as bars, the symbol from the partition key when
  // the file has no symbol column.
  BarSet bars_of(size_t k, std::shared_ptr<arrow::Table> table, int64_t first_row);
  BarReadOptions options_;
  std::vector<DatasetFile> files_;
  std::shared_ptr<arrow::Schema> first_schema_;
  // Where each series' declared inputs stand after the files read so far (read in order).
  std::shared_ptr<DeclaredCarry> carry_;
};

// Series that arrive in parts (a folder's files): one series per symbol in order of first
// appearance across the parts, each part's bars strictly after those before it.
class SeriesAssembly {
 public:
  // The index of each of the part's series in the whole, new symbols appended. Throws
  // qtft::Error naming the part's file when a series does not start after its earlier bars.
  std::vector<size_t> place(const BarSet& part);
  const std::vector<std::string>& symbols() const { return symbols_; }

 private:
  std::unordered_map<std::string, size_t> index_;
  std::vector<std::string> symbols_;
  std::vector<int64_t> last_ns_;
  std::vector<std::string> last_source_;
};

// Writes bars as a Hive-partitioned dataset: FOLDER/symbol=S/year=Y/part-0.parquet, one file
// per symbol and UTC year, without a symbol column (the folder names it); each file atomically.
// Returns the number of files written.
size_t write_parquet_partitions(const BarSet& bars, const std::string& folder);

// Parts of a source (a folder's files, or their batches) joined into its series in memory,
// each series trimmed to its last `keep` bars as the parts arrive.
class JoinedBars {
 public:
  explicit JoinedBars(std::string source, size_t keep = std::numeric_limits<size_t>::max());
  void add(BarSet part);
  BarSet take() { return std::move(bars_); }

 private:
  BarSet bars_;
  SeriesAssembly assembly_;
  size_t keep_;
  bool first_ = true;
};

// The bars of a whole folder, in memory (what load_bars does for a folder, uncut); with
// `keep`, only each series' last `keep` bars (what a forecast reads), trimmed file by file.
BarSet read_bars_parquet_dataset(const std::string& directory, const BarReadOptions& options,
                                 size_t keep = std::numeric_limits<size_t>::max());

}  // namespace qtft::data
