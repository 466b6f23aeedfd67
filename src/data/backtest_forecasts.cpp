#include "qtft/data/backtest_forecasts.h"

#include <arrow/api.h>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/arrow_bars.h"

namespace qtft::data {
namespace {

template <class Builder, class Values>
std::shared_ptr<arrow::Array> build(Builder& builder, const Values& values) {
  if (!builder.AppendValues(values).ok()) throw Error("cannot build the backtest's forecast table");
  return builder.Finish().ValueOrDie();
}

std::shared_ptr<arrow::DataType> utc_nanoseconds() { return arrow::timestamp(arrow::TimeUnit::NANO, "UTC"); }

// Column `name` of `table` as one array of type `Array`, or an error naming file and column.
template <class Array>
std::shared_ptr<Array> column(const arrow::Table& table, const std::string& name, const std::string& path) {
  const auto chunked = table.GetColumnByName(name);
  if (!chunked) throw Error(path + ": no column '" + name + "' (not a qtft backtest's forecasts)");
  auto combined = arrow::Concatenate(chunked->chunks());
  if (!combined.ok()) throw Error(path + ": cannot read column '" + name + "': " + combined.status().ToString());
  auto array = std::dynamic_pointer_cast<Array>(*combined);
  if (!array || array->null_count() > 0) {
    throw Error(path + ": column '" + name + "' holds " + chunked->type()->ToString() + (array ? " with nulls" : "") +
                ", not what a qtft backtest writes");
  }
  return array;
}

template <class Array, class T>
std::vector<T> values_of(const Array& array) {
  return std::vector<T>(array.raw_values(), array.raw_values() + array.length());
}

}  // namespace

std::string quantile_column(double level) { return "q" + format_number(level); }

void write_backtest_forecasts(const BacktestForecasts& f, const std::string& path) {
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  auto add = [&](const std::string& name, std::shared_ptr<arrow::Array> array) {
    fields.push_back(arrow::field(name, array->type(), false));
    arrays.push_back(std::move(array));
  };
  arrow::Int32Builder folds, steps;
  arrow::StringBuilder symbols;
  arrow::TimestampBuilder origins(utc_nanoseconds(), arrow::default_memory_pool());
  arrow::TimestampBuilder times(utc_nanoseconds(), arrow::default_memory_pool());
  add("fold", build(folds, f.fold));
  add("symbol", build(symbols, f.symbol));
  add("origin", build(origins, f.origin_ns));
  add("timestamp", build(times, f.timestamp_ns));
  add("step", build(steps, f.step));
  for (size_t q = 0; q < f.quantiles.size(); ++q) {
    arrow::DoubleBuilder values;
    add(quantile_column(f.quantiles[q]), build(values, f.value[q]));
  }
  arrow::DoubleBuilder realized;
  add("realized", build(realized, f.realized));
  write_parquet_table(*arrow::Table::Make(arrow::schema(fields), arrays), path);
}

BacktestForecasts read_backtest_forecasts(const std::string& path) {
  const auto table = read_parquet_table(path);
  BacktestForecasts f;
  f.fold = values_of<arrow::Int32Array, int32_t>(*column<arrow::Int32Array>(*table, "fold", path));
  const auto symbols = column<arrow::StringArray>(*table, "symbol", path);
  f.symbol.reserve(static_cast<size_t>(symbols->length()));
  for (int64_t i = 0; i < symbols->length(); ++i) f.symbol.emplace_back(symbols->GetView(i));
  f.origin_ns = values_of<arrow::TimestampArray, int64_t>(*column<arrow::TimestampArray>(*table, "origin", path));
  f.timestamp_ns = values_of<arrow::TimestampArray, int64_t>(*column<arrow::TimestampArray>(*table, "timestamp", path));
  f.step = values_of<arrow::Int32Array, int32_t>(*column<arrow::Int32Array>(*table, "step", path));
  // The quantile columns lie between step and realized, named q<level>.
  for (const auto& field : table->schema()->fields()) {
    const auto& name = field->name();
    if (name.size() < 2 || name[0] != 'q') continue;
    try {
      size_t used = 0;
      const double level = std::stod(name.substr(1), &used);
      if (used != name.size() - 1) continue;
      f.quantiles.push_back(level);
      f.value.push_back(values_of<arrow::DoubleArray, double>(*column<arrow::DoubleArray>(*table, name, path)));
    } catch (const std::logic_error&) {
      continue;  // a column named like q<text>: not a quantile
    }
  }
  if (f.quantiles.empty()) throw Error(path + ": no quantile column (q<level>): not a qtft backtest's forecasts");
  f.realized = values_of<arrow::DoubleArray, double>(*column<arrow::DoubleArray>(*table, "realized", path));
  return f;
}

void concatenate_backtest_forecasts(const std::vector<std::string>& parts, const std::string& path) {
  if (parts.empty()) throw Error(path + ": no forecasts to write");
  std::vector<std::shared_ptr<arrow::Table>> tables;
  tables.reserve(parts.size());
  for (const auto& part : parts) tables.push_back(read_parquet_table(part));
  auto whole = arrow::ConcatenateTables(tables);
  if (!whole.ok()) throw Error(path + ": the folds' forecasts differ in columns: " + whole.status().ToString());
  write_parquet_table(**whole, path);
}

}  // namespace qtft::data
