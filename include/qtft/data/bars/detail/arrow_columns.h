#pragma once

// The Arrow edge of the bar reader, shared by its parts: a column by name with its messages,
// Arrow columns of any supported type as flat vectors, and the declared input columns.
#include <arrow/array.h>
#include <arrow/chunked_array.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "qtft/common/error.h"
#include "qtft/data/bars/arrow_bars.h"

namespace qtft::data {

struct Column {
  std::string source;
  std::string name;
  const arrow::ChunkedArray* array = nullptr;
  int64_t first_row = 0;  // the table's first row in the file (a batch of a larger file)

  [[noreturn]] void fail_at(int64_t row, const std::string& what) const {
    throw Error(source + ": column '" + name + "', row " + std::to_string(first_row + row + 1) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(source + ": column '" + name + "': " + what); }
  void reject_nulls(const std::string& what = "null value") const {
    int64_t offset = 0;
    for (const auto& chunk : array->chunks()) {
      if (chunk->null_count() > 0) {
        for (int64_t i = 0; i < chunk->length(); ++i) {
          if (chunk->IsNull(i)) fail_at(offset + i, what);
        }
      }
      offset += chunk->length();
    }
  }
};

// Calls f(values_array, row_offset) for each chunk cast to its concrete Arrow array type.
template <class ArrayType, class F>
void for_each_chunk(const Column& col, F&& f) {
  int64_t offset = 0;
  for (const auto& chunk : col.array->chunks()) {
    f(static_cast<const ArrayType&>(*chunk), offset);
    offset += chunk->length();
  }
}

// Any integer or floating column as doubles; false for other types. `valid`, when given,
// gets each row's validity (a null reads as 0); without it the caller has rejected nulls.
bool copy_numbers(const Column& col, std::vector<double>& out, std::vector<uint8_t>* valid);
// A column of numbers without nulls; fails naming the column for another type.
std::vector<double> numeric_values(const Column& col);
// A bar column whose cells in future rows (`future`, empty when there are none) are not read.
std::vector<double> bar_values(const Column& col, const std::vector<uint8_t>& future);
// The close, and which rows are future rows (an empty close) when the reader takes them.
std::vector<double> close_values(const Column& col, bool future_rows, std::vector<uint8_t>& future);
// Timestamps of any supported type (Arrow timestamps, ISO-8601 text, epoch integers) as UTC ns.
std::vector<int64_t> timestamp_values(const Column& col, EpochUnit unit);

// Symbols become small integer codes (in order of first appearance) plus their names.
struct SymbolCodes {
  std::vector<int32_t> codes;
  std::vector<std::string> names;
};
SymbolCodes symbol_values(const Column& col);

const arrow::ChunkedArray* find_column(const arrow::Table& table, const std::string& name);

// A declared input column: numbers, nulls allowed (the reader decides what they mean). A
// NaN is missing as a null is: pandas and numpy write a missing number as NaN (a return's
// first difference), and a warm-up of NaN is a warm-up. An infinity is an error.
struct DeclaredColumn {
  Column col;
  std::vector<double> values;
  std::vector<uint8_t> valid;
};

DeclaredColumn declared_column(const arrow::Table& table, const std::string& source, const std::string& name,
                               int64_t first_row);
// The declared columns of every kind in the order bars hold them: observed, known, static,
// each kind's reals then its categoricals. `levels` gets each categorical column's levels.
std::vector<DeclaredColumn> declared_columns(const arrow::Table& table, const std::string& source,
                                             const InputDeclaration& declared, int64_t first_row,
                                             std::unordered_map<std::string, CategoryLevels>& levels);

}  // namespace qtft::data
