#include "qtft/data/bars/forecast_table.h"

#include <arrow/api.h>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/arrow_bars.h"

namespace qtft::data {
namespace {

template <class Builder, class Values>
std::shared_ptr<arrow::Array> build(Builder& builder, const Values& values) {
  if (!builder.AppendValues(values).ok()) throw Error("cannot build the forecast table");
  return builder.Finish().ValueOrDie();
}

std::shared_ptr<arrow::Array> doubles(const std::vector<double>& v) {
  arrow::DoubleBuilder b;
  return build(b, v);
}

std::shared_ptr<arrow::Array> timestamps(const std::vector<int64_t>& v) {
  arrow::TimestampBuilder b(arrow::timestamp(arrow::TimeUnit::NANO, "UTC"), arrow::default_memory_pool());
  return build(b, v);
}

}  // namespace

void write_forecast_table(const ForecastTable& t, const std::string& path) {
  bool csv = path.ends_with(".csv");
  if (!csv && !path.ends_with(".parquet")) throw UsageError("--output " + path + ": use a .csv or .parquet file name");
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  auto add = [&](const std::string& name, std::shared_ptr<arrow::Array> array) {
    fields.push_back(arrow::field(name, array->type(), false));
    arrays.push_back(std::move(array));
  };
  add("timestamp", timestamps(t.timestamp_ns));
  add("origin", timestamps(t.origin_ns));
  arrow::StringBuilder symbols;
  add("symbol", build(symbols, t.symbol));
  arrow::Int32Builder steps;
  add("step", build(steps, t.step));
  add("origin_close", doubles(t.origin_close));
  if (t.has_actual) add("actual_return", doubles(t.actual_return));
  for (size_t q = 0; q < t.quantiles.size(); ++q)
    add("return_q" + format_number(t.quantiles[q]), doubles(t.quantile_return[q]));
  for (size_t q = 0; q < t.quantiles.size(); ++q)
    add("price_q" + format_number(t.quantiles[q]), doubles(t.quantile_price[q]));
  auto table = arrow::Table::Make(arrow::schema(fields), arrays);
  if (csv)
    write_csv_table(*table, path);
  else
    write_parquet_table(*table, path);
}

}  // namespace qtft::data
