#include "qtft/data/bars/backtest_forecasts.h"

#include <arrow/api.h>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/arrow_bars.h"

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

std::string quantile_column(double level) {
  std::string name = "q";  // appended, not "q" + ...: GCC 12 warns falsely (-Wrestrict) on that inlined
  name += format_number(level);
  return name;
}

std::string conformal_column(double level) { return quantile_column(level) + "_conformal"; }

namespace {

// The table's columns: fold, symbol, origin, timestamp, step, q<level> per quantile,
// realized, then with `conformal` q<level>_conformal per quantile.
std::shared_ptr<arrow::Schema> schema_of(const std::vector<double>& quantiles, bool conformal) {
  std::vector<std::shared_ptr<arrow::Field>> fields{
      arrow::field("fold", arrow::int32(), false), arrow::field("symbol", arrow::utf8(), false),
      arrow::field("origin", utc_nanoseconds(), false), arrow::field("timestamp", utc_nanoseconds(), false),
      arrow::field("step", arrow::int32(), false)};
  for (const double level : quantiles) fields.push_back(arrow::field(quantile_column(level), arrow::float64(), false));
  fields.push_back(arrow::field("realized", arrow::float64(), false));
  if (conformal) {
    for (const double level : quantiles) {
      fields.push_back(arrow::field(conformal_column(level), arrow::float64(), false));
    }
  }
  return arrow::schema(fields);
}

std::shared_ptr<arrow::Table> table_of(const BacktestForecasts& f, const std::shared_ptr<arrow::Schema>& schema) {
  arrow::Int32Builder folds, steps;
  arrow::StringBuilder symbols;
  arrow::TimestampBuilder origins(utc_nanoseconds(), arrow::default_memory_pool());
  arrow::TimestampBuilder times(utc_nanoseconds(), arrow::default_memory_pool());
  std::vector<std::shared_ptr<arrow::Array>> arrays{build(folds, f.fold), build(symbols, f.symbol),
                                                    build(origins, f.origin_ns), build(times, f.timestamp_ns),
                                                    build(steps, f.step)};
  for (const auto& values : f.value) {
    arrow::DoubleBuilder builder;
    arrays.push_back(build(builder, values));
  }
  arrow::DoubleBuilder realized;
  arrays.push_back(build(realized, f.realized));
  for (const auto& values : f.conformal) {
    arrow::DoubleBuilder builder;
    arrays.push_back(build(builder, values));
  }
  return arrow::Table::Make(schema, arrays);
}

}  // namespace

struct BacktestForecastWriter::State {
  State(const std::string& path, const std::vector<double>& quantiles, bool conformal)
      : schema(schema_of(quantiles, conformal)), file(path, schema) {}
  std::shared_ptr<arrow::Schema> schema;
  ParquetTableWriter file;
};

BacktestForecastWriter::BacktestForecastWriter(const std::string& path, const std::vector<double>& quantiles,
                                               bool conformal)
    : state_(std::make_unique<State>(path, quantiles, conformal)),
      path_(path),
      quantiles_(quantiles),
      conformal_(conformal) {}

BacktestForecastWriter::~BacktestForecastWriter() = default;

void BacktestForecastWriter::write(const BacktestForecasts& rows) {
  if (rows.quantiles != quantiles_) {
    const auto listed = [](const std::vector<double>& levels) {
      std::string names;
      for (const double level : levels) {
        if (!names.empty()) names += ", ";
        names += quantile_column(level);
      }
      return names;
    };
    throw Error(path_ + ": forecast rows of quantiles " + listed(rows.quantiles) + " for a file of " +
                listed(quantiles_));
  }
  if (rows.conformal.size() != (conformal_ ? quantiles_.size() : 0)) {
    throw Error(path_ + ": forecast rows " + (rows.conformal.empty() ? "without" : "with") +
                " conformal quantiles for a file " + (conformal_ ? "of" : "without") + " them");
  }
  if (rows.rows() > 0) state_->file.write(*table_of(rows, state_->schema));
}

void BacktestForecastWriter::commit() { state_->file.commit(); }

void write_backtest_forecasts(const BacktestForecasts& forecasts, const std::string& path) {
  BacktestForecastWriter writer(path, forecasts.quantiles, !forecasts.conformal.empty());
  writer.write(forecasts);
  writer.commit();
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
  // Every level's conformal column, or none.
  if (table->GetColumnByName(conformal_column(f.quantiles.front()))) {
    for (const double level : f.quantiles) {
      f.conformal.push_back(
          values_of<arrow::DoubleArray, double>(*column<arrow::DoubleArray>(*table, conformal_column(level), path)));
    }
  }
  return f;
}

bool backtest_forecasts_have_conformal(const std::string& path) {
  const auto schema = read_parquet_schema(path);
  for (const auto& field : schema->fields()) {
    if (field->name().ends_with("_conformal")) return true;
  }
  return false;
}

void concatenate_backtest_forecasts(const std::vector<std::string>& parts, const std::string& path) {
  if (parts.empty()) throw Error(path + ": no forecasts to write");
  const auto schema = read_parquet_schema(parts.front());
  const auto names = [](const arrow::Schema& s) {
    std::string out;
    for (const auto& field : s.fields()) out += (out.empty() ? "" : ", ") + field->name();
    return out;
  };
  for (const auto& part : parts) {
    const auto other = read_parquet_schema(part);
    if (!other->Equals(*schema)) {
      throw Error(part + ": its columns (" + names(*other) + ") are not those of " + parts.front() + " (" +
                  names(*schema) + "): the folds' parts cannot make one " + path);
    }
  }
  ParquetTableWriter whole(path, schema);
  for (const auto& part : parts) {
    read_parquet_batches(part, [&](std::shared_ptr<arrow::Table> batch, int64_t) { whole.write(*batch); });
  }
  whole.commit();
}

}  // namespace qtft::data
