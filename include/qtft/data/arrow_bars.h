#pragma once

#include <memory>
#include <string>

#include "qtft/data/bars.h"

namespace arrow {
class Schema;
class Table;
}  // namespace arrow

namespace qtft::data {

// The Arrow edge of the bar reader: picks the columns by name, converts every supported
// Arrow type, and validates row by row. Exposed for callers that already hold a table.
BarSet bars_from_table(const arrow::Table& table, const std::string& source, const BarReadOptions& options);

std::shared_ptr<arrow::Table> read_parquet_table(const std::string& path);
// The schema from a Parquet file's footer, without reading its data.
std::shared_ptr<arrow::Schema> read_parquet_schema(const std::string& path);
std::shared_ptr<arrow::Table> read_csv_table(const std::string& path);
void write_parquet_table(const arrow::Table& table, const std::string& path);
void write_csv_table(const arrow::Table& table, const std::string& path);
std::shared_ptr<arrow::Table> bars_to_table(const BarSet& bars);

}  // namespace qtft::data
