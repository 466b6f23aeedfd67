// Folders of Parquet files through Arrow's dataset discovery. Each file is read on its own
// (one file's bars in memory at a time), so a caller that streams (the feature store) holds
// no more than the largest file.
#include "qtft/data/bars/parquet_dataset.h"

#include <arrow/api.h>
#include <arrow/dataset/discovery.h>
#include <arrow/dataset/file_parquet.h>
#include <arrow/dataset/partition.h>
#include <arrow/filesystem/localfs.h>
#include <parquet/arrow/reader.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/statistics.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/arrow_bars.h"

namespace qtft::data {
namespace {

template <class T>
T unwrap(arrow::Result<T> result, const std::string& path, const std::string& what) {
  if (!result.ok()) throw Error(path + ": " + what + ": " + result.status().message());
  return std::move(result).ValueUnsafe();
}

// The symbol partition key of `relative` (a path below the dataset folder), if a folder
// of it is one. Arrow parses the segment (URL-decoding, Hive's null fallback).
std::optional<std::string> partition_symbol(const std::string& path, const std::filesystem::path& relative,
                                            const std::string& symbol_column) {
  std::optional<std::string> found;
  const arrow::dataset::HivePartitioningOptions hive;
  for (auto it = relative.begin(); it != relative.end() && std::next(it) != relative.end(); ++it) {
    auto key = unwrap(arrow::dataset::HivePartitioning::ParseKey(it->string(), hive), path, "partition folder");
    if (!key || key->name != symbol_column) continue;
    const std::string shown = symbol_column + "=" + key->value.value_or(hive.null_fallback);
    if (!key->value || key->value->empty() || key->value->find_first_of("\r\n\"") != std::string::npos) {
      throw Error(path + ": partition key " + shown +
                  " is not a valid symbol (empty, null, or holding a line break "
                  "or quote)");
    }
    found = *key->value;
  }
  return found;
}

std::string describe_schema_difference(const arrow::Schema& first, const arrow::Schema& other) {
  for (const auto& f : first.fields()) {
    auto o = other.GetFieldByName(f->name());
    if (!o) return "has no column '" + f->name() + "'";
    if (!o->type()->Equals(*f->type())) {
      return "column '" + f->name() + "' has type " + o->type()->ToString() + ", not " + f->type()->ToString();
    }
  }
  for (const auto& o : other.fields()) {
    if (!first.GetFieldByName(o->name())) return "has a column '" + o->name() + "' that the first file lacks";
  }
  return "";
}

std::shared_ptr<arrow::Table> with_symbol_column(std::shared_ptr<arrow::Table> table, const std::string& name,
                                                 const std::string& symbol, const std::string& path) {
  arrow::StringBuilder builder;
  if (!builder.Reserve(table->num_rows()).ok() ||
      !builder.ReserveData(table->num_rows() * static_cast<int64_t>(symbol.size())).ok()) {
    throw Error(path + ": out of memory for the symbol column");
  }
  for (int64_t i = 0; i < table->num_rows(); ++i) builder.UnsafeAppend(symbol);
  auto array = unwrap(builder.Finish(), path, "symbol column");
  return unwrap(table->AddColumn(table->num_columns(), arrow::field(name, arrow::utf8()),
                                 std::make_shared<arrow::ChunkedArray>(array)),
                path, "symbol column");
}

}  // namespace

bool is_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

std::vector<DatasetFile> list_parquet_dataset(const std::string& directory, const BarReadOptions& options) {
  namespace ds = arrow::dataset;
  const auto base = std::filesystem::absolute(directory).lexically_normal();
  auto fs = std::make_shared<arrow::fs::LocalFileSystem>();
  arrow::fs::FileSelector selector;
  selector.base_dir = base.string();
  selector.recursive = true;
  ds::FileSystemFactoryOptions factory_options;  // skips names starting with '.' or '_'
  auto factory = unwrap(
      ds::FileSystemDatasetFactory::Make(fs, selector, std::make_shared<ds::ParquetFileFormat>(), factory_options),
      directory, "cannot list the dataset");
  ds::FinishOptions finish;
  finish.inspect_options.fragments = 0;  // each file is checked when read, with its name
  auto dataset = unwrap(factory->Finish(finish), directory, "cannot list the dataset");
  auto fragments = unwrap(dataset->GetFragments(), directory, "cannot list the dataset");

  std::vector<DatasetFile> files;
  for (auto next : fragments) {
    auto fragment = unwrap(std::move(next), directory, "cannot list the dataset");
    const auto& file = static_cast<const ds::FileFragment&>(*fragment);
    DatasetFile f;
    f.path = file.source().path();
    // A feature store kept inside the folder under a name Arrow does not skip (--feature-store
    // FOLDER/stores) is qtft's own file, not data.
    if (f.path.ends_with(".qtfs")) continue;
    std::error_code ec;
    f.size_bytes = static_cast<int64_t>(std::filesystem::file_size(f.path, ec));
    auto mtime = std::filesystem::last_write_time(f.path, ec);
    f.modified_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count();
    f.partition_symbol =
        partition_symbol(f.path, std::filesystem::path(f.path).lexically_relative(base), options.columns.symbol);
    files.push_back(std::move(f));
  }
  if (files.empty()) throw Error(directory + ": the folder holds no Parquet files");
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return files;
}

DatasetReader::DatasetReader(const std::string& directory, BarReadOptions options)
    : options_(std::move(options)),
      files_(list_parquet_dataset(directory, options_)),
      carry_(std::make_shared<DeclaredCarry>()) {}

void DatasetReader::check_columns(size_t k, const std::shared_ptr<arrow::Schema>& schema) {
  if (!first_schema_) first_schema_ = k == 0 ? schema : read_parquet_schema(files_.front().path);
  if (k == 0) return;
  const auto difference = describe_schema_difference(*first_schema_, *schema);
  if (!difference.empty()) {
    throw Error(files_.at(k).path + ": " + difference + " (the dataset's first file, " + files_.front().path +
                ", sets the columns every file must have)");
  }
}

BarSet DatasetReader::bars_of(size_t k, std::shared_ptr<arrow::Table> table, int64_t first_row) {
  const auto& file = files_.at(k);
  if (file.partition_symbol && !table->GetColumnByName(options_.columns.symbol)) {
    table = with_symbol_column(std::move(table), options_.columns.symbol, *file.partition_symbol, file.path);
  }
  return bars_from_table(*table, file.path, options_, carry_.get(), first_row);
}

BarSet DatasetReader::read(size_t k) {
  auto table = read_parquet_table(files_.at(k).path);
  check_columns(k, table->schema());
  return bars_of(k, std::move(table), 0);
}

namespace {

// The span of a Parquet file's timestamp column from its footer's statistics (UTC ns), or
// nullopt when the footer lacks them or the column is not an Arrow timestamp.
std::optional<std::pair<int64_t, int64_t>> footer_time_span(const std::string& path, const std::string& column) {
  try {
    const auto file = parquet::ParquetFileReader::OpenFile(path, false);
    const auto metadata = file->metadata();
    const int index = metadata->schema()->ColumnIndex(column);
    if (index < 0 || metadata->num_row_groups() == 0) return std::nullopt;
    std::pair span{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
    for (int group = 0; group < metadata->num_row_groups(); ++group) {
      const auto statistics = metadata->RowGroup(group)->ColumnChunk(index)->statistics();
      if (!statistics || !statistics->HasMinMax()) return std::nullopt;
      std::shared_ptr<arrow::Scalar> low, high;
      if (!parquet::arrow::StatisticsAsScalars(*statistics, &low, &high).ok() ||
          low->type->id() != arrow::Type::TIMESTAMP || high->type->id() != arrow::Type::TIMESTAMP) {
        return std::nullopt;
      }
      const auto ns = [](const arrow::Scalar& scalar) -> std::optional<int64_t> {
        const auto& type = static_cast<const arrow::TimestampType&>(*scalar.type);
        const int64_t factor = type.unit() == arrow::TimeUnit::SECOND  ? 1'000'000'000
                               : type.unit() == arrow::TimeUnit::MILLI ? 1'000'000
                               : type.unit() == arrow::TimeUnit::MICRO ? 1'000
                                                                       : 1;
        int64_t value = 0;
        if (__builtin_mul_overflow(static_cast<const arrow::TimestampScalar&>(scalar).value, factor, &value)) {
          return std::nullopt;
        }
        return value;
      };
      const auto group_low = ns(*low), group_high = ns(*high);
      if (!group_low || !group_high) return std::nullopt;
      span = {std::min(span.first, *group_low), std::max(span.second, *group_high)};
    }
    return span;
  } catch (const parquet::ParquetException&) {
    return std::nullopt;  // reading the file says what is wrong with it
  }
}

}  // namespace

bool DatasetReader::may_hold_bars_between(size_t k, int64_t from_ns, int64_t through_ns) const {
  if (!options_.inputs.empty()) return true;
  const auto span = footer_time_span(files_.at(k).path, options_.columns.timestamp);
  return !span || (span->second >= from_ns && span->first <= through_ns);
}

void DatasetReader::read_batches(size_t k, const std::function<void(const BarSet& part)>& use) {
  check_columns(k, read_parquet_schema(files_.at(k).path));
  read_parquet_batches(files_.at(k).path, [&](std::shared_ptr<arrow::Table> batch, int64_t first_row) {
    use(bars_of(k, std::move(batch), first_row));
  });
}

std::vector<size_t> SeriesAssembly::place(const BarSet& part) {
  std::vector<size_t> where;
  for (const auto& s : part.series) {
    auto [it, added] = index_.try_emplace(s.symbol, symbols_.size());
    const size_t i = it->second;
    if (added) {
      symbols_.push_back(s.symbol);
      last_ns_.push_back(0);
      last_source_.push_back("");
    } else if (!s.timestamp_ns.empty() && s.timestamp_ns.front() <= last_ns_[i]) {
      throw Error(part.source + ": symbol '" + s.symbol + "' starts at " + format_utc(s.timestamp_ns.front()) +
                  ", not after its last bar so far (" + format_utc(last_ns_[i]) + " in " + last_source_[i] +
                  "): a dataset's files, in path order, must hold each symbol's bars in time order without overlap");
    }
    if (!s.timestamp_ns.empty()) {
      last_ns_[i] = s.timestamp_ns.back();
      last_source_[i] = part.source;
    }
    where.push_back(i);
  }
  return where;
}

size_t write_parquet_partitions(const BarSet& bars, const std::string& folder) {
  namespace chrono = std::chrono;
  auto year_of = [](int64_t ns) {
    const auto day = chrono::floor<chrono::days>(chrono::sys_time<chrono::nanoseconds>(chrono::nanoseconds(ns)));
    return static_cast<int>(chrono::year_month_day(day).year());
  };
  size_t files = 0;
  for (const auto& s : bars.series) {
    for (size_t begin = 0; begin < s.size();) {
      const int year = year_of(s.timestamp_ns[begin]);
      size_t end = begin;
      while (end < s.size() && year_of(s.timestamp_ns[end]) == year) ++end;
      BarSet part;
      part.fields = bars.fields;
      part.declared = bars.declared;
      part.series.push_back(slice_bars(s, begin, end));
      auto table = bars_to_table(part);
      table = unwrap(table->RemoveColumn(table->schema()->GetFieldIndex("symbol")), folder, "partition");
      const auto dir = std::filesystem::path(folder) / ("symbol=" + s.symbol) / ("year=" + std::to_string(year));
      std::filesystem::create_directories(dir);
      write_parquet_table(*table, (dir / "part-0.parquet").string());
      ++files;
      begin = end;
    }
  }
  return files;
}

JoinedBars::JoinedBars(std::string source, size_t keep) : keep_(keep) { bars_.source = std::move(source); }

void JoinedBars::add(BarSet part) {
  if (std::exchange(first_, false)) {
    bars_.fields = part.fields;
    bars_.declared = part.declared;
    bars_.unused_columns = part.unused_columns;
  }
  const auto where = assembly_.place(part);
  bars_.leading_null_rows += part.leading_null_rows;
  for (size_t j = 0; j < part.series.size(); ++j) {
    keep_last_bars(part.series[j], keep_);  // each part trimmed as it arrives
    if (where[j] == bars_.series.size()) bars_.series.emplace_back().symbol = part.series[j].symbol;
    append_bars(bars_.series[where[j]], part.series[j]);
    keep_last_bars(bars_.series[where[j]], keep_);
  }
}

BarSet read_bars_parquet_dataset(const std::string& directory, const BarReadOptions& options, size_t keep) {
  DatasetReader reader(directory, options);
  JoinedBars bars(directory, keep);
  for (size_t k = 0; k < reader.files().size(); ++k) bars.add(reader.read(k));
  return bars.take();
}

}  // namespace qtft::data
