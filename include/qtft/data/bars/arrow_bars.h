#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "qtft/data/bars/bars.h"

namespace arrow {
class Schema;
class Table;
}  // namespace arrow

namespace qtft::data {

// The declared inputs of the series read so far from a source that comes in parts (a folder's
// files): a series found here is past its warm-up of nulls, and forward-fill continues from
// these values, its last.
// A categorical column's levels, so that a level has one index across all parts.
struct CategoryLevels {
  std::vector<std::string> names;  // in order of first appearance
  std::unordered_map<std::string, int32_t> index;
};
struct DeclaredCarry {
  std::unordered_map<std::string, std::vector<double>> last;  // observed columns, then known, then static
  std::unordered_map<std::string, CategoryLevels> levels;     // by categorical column
};

// The Arrow edge of the bar reader: picks the columns by name, converts every supported
// Arrow type, and validates row by row. Exposed for callers that already hold a table.
// `first_row`: the table's first row in the file, when it is a batch of it (for messages).
BarSet bars_from_table(const arrow::Table& table, const std::string& source, const BarReadOptions& options,
                       DeclaredCarry* carry = nullptr, int64_t first_row = 0);
// A Parquet file a record batch at a time (Arrow's default batch of 64Ki rows), with the
// batch's first row in the file: memory follows a batch, not the file.
void read_parquet_batches(const std::string& path,
                          const std::function<void(std::shared_ptr<arrow::Table> batch, int64_t first_row)>& use);
// The declared inputs of `options` resolved against a file's columns, as bars_from_table
// resolves them (the bar columns in use never match a glob), and the columns no input reads
// into `unused` when given.
InputDeclaration resolve_declared_inputs(const arrow::Schema& schema, const BarReadOptions& options,
                                         const std::string& source, std::vector<std::string>* unused = nullptr);

std::shared_ptr<arrow::Table> read_parquet_table(const std::string& path);
// Each series' last `keep` bars of a Parquet file and its future rows, what a forecast reads:
// the symbol and close columns of every row group find the groups that hold them, and only
// those (from the first of them on) are read, so a desk's export of years costs its last
// row groups. Options that contradict the file's columns (--symbol with a symbol column) are
// refused from the footer, before any data is read.
BarSet read_latest_bars_parquet(const std::string& path, const BarReadOptions& options, size_t keep);
// The schema from a Parquet file's footer, without reading its data.
std::shared_ptr<arrow::Schema> read_parquet_schema(const std::string& path);
std::shared_ptr<arrow::Table> read_csv_table(const std::string& path);
void write_parquet_table(const arrow::Table& table, const std::string& path);
// A Parquet file written a table at a time, so that memory follows the table written and not
// the file: each write() adds row groups of at most 64Ki rows. The file appears at `path`
// complete on commit(), or not at all (destroyed before, it removes its temporary).
class ParquetTableWriter {
 public:
  ParquetTableWriter(const std::string& path, std::shared_ptr<arrow::Schema> schema);
  ~ParquetTableWriter();
  ParquetTableWriter(const ParquetTableWriter&) = delete;
  ParquetTableWriter& operator=(const ParquetTableWriter&) = delete;
  // Throws qtft::Error naming the file when `table`'s columns differ from the schema's.
  void write(const arrow::Table& table);
  void commit();

 private:
  struct State;
  std::unique_ptr<State> state_;
};
void write_csv_table(const arrow::Table& table, const std::string& path);
std::shared_ptr<arrow::Table> bars_to_table(const BarSet& bars);

}  // namespace qtft::data
