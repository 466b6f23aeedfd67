// Parquet and CSV files in and out through Arrow. Arrow's Status and Result end here:
// callers see qtft::Error with the file name in front.
#include <arrow/api.h>
#include <arrow/csv/api.h>
#include <arrow/io/api.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#include <parquet/exception.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <unordered_map>

#include "qtft/common/error.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/io/atomic_file.h"

namespace qtft::data {
namespace {

void check(const arrow::Status& status, const std::string& path, const std::string& what) {
  if (status.ok()) return;
  // The detail holds the reason ("[errno 28] No space left on device"); message() alone
  // would say only "Error writing bytes to file".
  std::string reason = status.message();
  if (status.detail()) reason += " (" + status.detail()->ToString() + ")";
  throw Error(path + ": " + what + ": " + reason);
}

template <class T>
T unwrap(arrow::Result<T> result, const std::string& path, const std::string& what) {
  check(result.status(), path, what);
  return std::move(result).ValueUnsafe();
}

void require_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": no such file");
  if (std::filesystem::file_size(path, ec) == 0) throw Error(path + ": the file is empty");
}

}  // namespace

// How a reader takes a file in: whole (the file's table at once, as fast as Arrow reads), or
// streamed, where memory follows a batch of rows and not a row group.
enum class ParquetReading { Whole, Streamed };

// Streamed: Arrow's pre-buffering would fetch a row group's column chunks up front, and an
// unbuffered column reader holds its whole chunk; a row group of 1M rows and 225 double
// columns is 1.8 GB either way. Each column reads through a small buffer instead, and
// batches are 64k rows.
constexpr int64_t kStreamBufferBytes = 256 * 1024;
constexpr int64_t kStreamBatchRows = 64 * 1024;

// Opens a Parquet file and hands its reader to `use`; a file that is not Parquet (or is cut
// short) fails with its name, whether Arrow says so by Status or by exception.
template <class F>
auto with_parquet_reader(const std::string& path, ParquetReading reading, F&& use) {
  require_file(path);
  auto input = unwrap(arrow::io::ReadableFile::Open(path), path, "cannot open");
  try {
    auto properties = parquet::default_reader_properties();
    auto arrow_properties = parquet::default_arrow_reader_properties();
    if (reading == ParquetReading::Streamed) {
      properties.enable_buffered_stream();
      properties.set_buffer_size(kStreamBufferBytes);
      arrow_properties.set_pre_buffer(false);
      arrow_properties.set_batch_size(kStreamBatchRows);
    }
    parquet::arrow::FileReaderBuilder builder;
    check(builder.Open(input, properties), path, "not a valid Parquet file");
    builder.memory_pool(arrow::default_memory_pool())->properties(arrow_properties);
    auto reader = unwrap(builder.Build(), path, "not a valid Parquet file");
    return use(*reader);
  } catch (const parquet::ParquetException& e) {
    throw Error(path + ": not a valid Parquet file: " + e.what());
  }
}

std::shared_ptr<arrow::Table> read_parquet_table(const std::string& path) {
  return with_parquet_reader(path, ParquetReading::Whole, [&](parquet::arrow::FileReader& reader) {
    return unwrap(reader.ReadTable(), path, "cannot read Parquet data");
  });
}

void read_parquet_batches(const std::string& path,
                          const std::function<void(std::shared_ptr<arrow::Table> batch, int64_t first_row)>& use) {
  with_parquet_reader(path, ParquetReading::Streamed, [&](parquet::arrow::FileReader& reader) {
    int64_t first_row = 0;
    // A reader per row group: over the whole file, Arrow's pre-buffering (were it on) would
    // fetch every row group's column chunks up front (measured: a 24M-bar file of 1M-row
    // groups peaked at 1.3 GiB of anonymous memory, about the file's size).
    for (int group = 0; group < reader.num_row_groups(); ++group) {
      auto batches = unwrap(reader.GetRecordBatchReader({group}), path, "cannot read Parquet data");
      for (;;) {
        auto batch = unwrap(batches->Next(), path, "cannot read Parquet data");
        if (!batch) break;
        if (batch->num_rows() == 0) continue;
        auto table = unwrap(arrow::Table::FromRecordBatches({batch}), path, "cannot read Parquet data");
        use(std::move(table), first_row);
        first_row += batch->num_rows();
      }
    }
    return first_row;
  });
}

namespace {

// Each row's series as an index into `ids` (its name as text: a dictionary's value, a
// string, an integer), appended to `out`; false for a column of another type.
bool series_of_rows(const arrow::Array& column, std::unordered_map<std::string, size_t>& ids,
                    std::vector<size_t>& out) {
  auto id_of = [&](std::string name) { return ids.try_emplace(std::move(name), ids.size()).first->second; };
  if (column.type_id() == arrow::Type::DICTIONARY) {
    const auto& dictionary = static_cast<const arrow::DictionaryArray&>(column);
    std::vector<size_t> by_index;
    const auto& values = *dictionary.dictionary();
    if (!series_of_rows(values, ids, by_index)) return false;
    for (int64_t i = 0; i < column.length(); ++i) {
      out.push_back(column.IsNull(i) ? SIZE_MAX : by_index[static_cast<size_t>(dictionary.GetValueIndex(i))]);
    }
    return true;
  }
  auto each = [&](auto&& name_at) {
    for (int64_t i = 0; i < column.length(); ++i) out.push_back(column.IsNull(i) ? SIZE_MAX : id_of(name_at(i)));
  };
  switch (column.type_id()) {
    case arrow::Type::STRING:
      each([&](int64_t i) { return std::string(static_cast<const arrow::StringArray&>(column).GetView(i)); });
      return true;
    case arrow::Type::LARGE_STRING:
      each([&](int64_t i) { return std::string(static_cast<const arrow::LargeStringArray&>(column).GetView(i)); });
      return true;
    case arrow::Type::INT64:
      each([&](int64_t i) { return std::to_string(static_cast<const arrow::Int64Array&>(column).Value(i)); });
      return true;
    case arrow::Type::INT32:
      each([&](int64_t i) { return std::to_string(static_cast<const arrow::Int32Array&>(column).Value(i)); });
      return true;
    default: return false;
  }
}

// Which row groups hold part of a series' last `keep` bars or its future rows: the symbol
// and close columns of every group are read (two columns, not the file) from the last group
// back, counting each series' bars (rows with a close; future rows have none), and the
// series in order of first appearance in the file, as a whole read orders them. `needed` is
// empty when the columns cannot be told apart here: the whole file is read then.
struct LatestGroups {
  std::vector<uint8_t> needed;      // by row group
  std::vector<std::string> series;  // by first appearance
};
LatestGroups groups_of_latest(parquet::arrow::FileReader& reader, const arrow::Schema& schema,
                              const BarReadOptions& options, size_t keep, const std::string& path) {
  const auto& names = options.columns;
  // Parquet's leaf columns, which ReadRowGroup numbers, are Arrow's fields only when no field
  // is nested: otherwise the whole file.
  for (const auto& field : schema.fields()) {
    if (field->type()->num_fields() > 0) return {};
  }
  int close = schema.GetFieldIndex(names.close);
  if (close < 0 && names.close == "close") close = schema.GetFieldIndex("price");
  const int symbol = options.symbol.empty() ? schema.GetFieldIndex(names.symbol) : -1;
  if (close < 0) return {};  // bars_from_table names the missing column
  std::unordered_map<std::string, size_t> ids;
  std::vector<size_t> bars;                    // by series id, counted from the end
  std::vector<std::pair<int, int64_t>> first;  // by series id: its earliest (group, row)
  std::vector<uint8_t> needed(static_cast<size_t>(reader.num_row_groups()), 0);
  for (int group = reader.num_row_groups() - 1; group >= 0; --group) {
    std::vector<int> columns{close};
    if (symbol >= 0) columns.push_back(symbol);
    auto table = unwrap(reader.ReadRowGroup(group, columns), path, "cannot read Parquet data");
    table = unwrap(table->CombineChunks(), path, "cannot read Parquet data");
    if (table->num_rows() == 0) continue;
    const auto& closes = *table->column(0)->chunk(0);
    std::vector<size_t> series;
    if (symbol < 0) {
      series.assign(static_cast<size_t>(closes.length()), 0);
      ids.try_emplace("", 0);
    } else if (!series_of_rows(*table->column(1)->chunk(0), ids, series)) {
      return {};
    }
    bars.resize(ids.size(), 0);
    first.resize(ids.size());
    for (int64_t i = closes.length() - 1; i >= 0; --i) {
      const size_t s = series[static_cast<size_t>(i)];
      if (s != SIZE_MAX) first[s] = {group, i};
      // A row without a symbol is read, for bars_from_table to refuse by row.
      if (s == SIZE_MAX || bars[s] < keep) needed[static_cast<size_t>(group)] = 1;
      if (s != SIZE_MAX && !closes.IsNull(i)) ++bars[s];
    }
  }
  LatestGroups out{std::move(needed), std::vector<std::string>(ids.size())};
  std::vector<size_t> order(ids.size());
  for (size_t s = 0; s < order.size(); ++s) order[s] = s;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return first[a] < first[b]; });
  std::vector<std::string> by_id(ids.size());
  for (const auto& [name, s] : ids) by_id[s] = name;
  for (size_t k = 0; k < order.size(); ++k) out.series[k] = by_id[order[k]];
  return out;
}

}  // namespace

BarSet read_latest_bars_parquet(const std::string& path, const BarReadOptions& options, size_t keep) {
  return with_parquet_reader(path, ParquetReading::Whole, [&](parquet::arrow::FileReader& reader) {
    std::shared_ptr<arrow::Schema> schema;
    check(reader.GetSchema(&schema), path, "cannot read the Parquet schema");
    // The flags are checked against the footer's columns before any row is read.
    if (!options.symbol.empty() && schema->GetFieldIndex(options.columns.symbol) >= 0) {
      throw Error(path + ": has a symbol column '" + options.columns.symbol + "'; --symbol " + options.symbol +
                  " names the series of files without one");
    }
    const int groups = reader.num_row_groups();
    auto read_whole = [&] {
      BarSet bars = bars_from_table(*unwrap(reader.ReadTable(), path, "cannot read Parquet data"), path, options);
      for (auto& s : bars.series) keep_last_bars(s, keep);
      return bars;
    };
    // Forward-fill would carry a value across the groups skipped: the whole file then.
    if (groups < 2 || options.inputs.missing == MissingValues::ForwardFill) return read_whole();
    const auto latest = groups_of_latest(reader, *schema, options, keep, path);
    const auto& needed = latest.needed;
    if (needed.empty()) return read_whole();
    // Each run of consecutive needed groups is one part, its rows numbered as in the file;
    // the parts join as a folder's files do (JoinedBars), each series trimmed to `keep`.
    JoinedBars joined(path, keep);
    DeclaredCarry carry;
    int64_t first_row = 0;
    for (int g = 0; g < groups;) {
      const int64_t group_rows = reader.parquet_reader()->metadata()->RowGroup(g)->num_rows();
      if (!needed[static_cast<size_t>(g)]) {
        first_row += group_rows;
        ++g;
        continue;
      }
      std::vector<int> run;
      int64_t run_rows = 0;
      for (; g < groups && needed[static_cast<size_t>(g)]; ++g) {
        run.push_back(g);
        run_rows += reader.parquet_reader()->metadata()->RowGroup(g)->num_rows();
      }
      auto table = unwrap(reader.ReadRowGroups(run), path, "cannot read Parquet data");
      joined.add(bars_from_table(*table, path, options, &carry, first_row));
      first_row += run_rows;
    }
    BarSet bars = joined.take();
    // A series whose first rows read were a warm-up of nulls may be short of bars the file
    // holds before them: the whole file then.
    const bool short_series =
        std::any_of(bars.series.begin(), bars.series.end(), [&](const BarSeries& s) { return s.size() < keep; });
    if (bars.leading_null_rows > 0 || (short_series && std::count(needed.begin(), needed.end(), 0) > 0)) {
      return read_whole();
    }
    // The series in the whole file's order (the runs meet them in another order when a
    // series' first groups were skipped); a name the scan does not know stays last.
    std::unordered_map<std::string, size_t> first_seen;
    for (size_t k = 0; k < latest.series.size(); ++k) first_seen.emplace(latest.series[k], k);
    auto rank = [&](const BarSeries& s) {
      const auto it = first_seen.find(s.symbol);
      return it == first_seen.end() ? latest.series.size() : it->second;
    };
    std::stable_sort(bars.series.begin(), bars.series.end(),
                     [&](const BarSeries& a, const BarSeries& b) { return rank(a) < rank(b); });
    return bars;
  });
}

std::shared_ptr<arrow::Schema> read_parquet_schema(const std::string& path) {
  return with_parquet_reader(path, ParquetReading::Whole, [&](parquet::arrow::FileReader& reader) {
    std::shared_ptr<arrow::Schema> schema;
    check(reader.GetSchema(&schema), path, "cannot read the Parquet schema");
    return schema;
  });
}

std::shared_ptr<arrow::Table> read_csv_table(const std::string& path) {
  require_file(path);
  auto input = unwrap(arrow::io::ReadableFile::Open(path), path, "cannot open");
  auto read_options = arrow::csv::ReadOptions::Defaults();
  auto parse_options = arrow::csv::ParseOptions::Defaults();
  auto convert_options = arrow::csv::ConvertOptions::Defaults();
  // Arrow reads "nan" and "NaN" as null by default; we keep them as numbers so that the
  // error says the value is not finite, which is what the user wrote.
  convert_options.null_values = {"", "NULL", "null", "NA", "N/A", "#N/A"};
  auto reader =
      unwrap(arrow::csv::TableReader::Make(arrow::io::IOContext(), input, read_options, parse_options, convert_options),
             path, "cannot read CSV");
  return unwrap(reader->Read(), path, "cannot read CSV");
}

struct ParquetTableWriter::State {
  State(const std::string& final_path) : path(final_path), file(final_path) {}
  std::string path;
  io::AtomicFile file;
  std::shared_ptr<arrow::io::FileOutputStream> sink;
  std::unique_ptr<parquet::arrow::FileWriter> writer;
};

ParquetTableWriter::ParquetTableWriter(const std::string& path, std::shared_ptr<arrow::Schema> schema)
    : state_(std::make_unique<State>(path)) {
  state_->sink = unwrap(arrow::io::FileOutputStream::Open(state_->file.temp_path().string()), path, "cannot create");
  auto props = parquet::WriterProperties::Builder().compression(parquet::Compression::SNAPPY)->build();
  try {
    state_->writer =
        unwrap(parquet::arrow::FileWriter::Open(*schema, arrow::default_memory_pool(), state_->sink, props), path,
               "cannot write Parquet");
  } catch (const parquet::ParquetException& e) {
    throw Error(path + ": cannot write Parquet: " + e.what());
  }
}

ParquetTableWriter::~ParquetTableWriter() {
  if (!state_->writer) return;
  // Abandoned: close the streams so that the temporary can go (AtomicFile removes it).
  (void)state_->writer->Close();
  (void)state_->sink->Close();
}

void ParquetTableWriter::write(const arrow::Table& table) {
  if (!state_->writer) throw Error(state_->path + ": written after it was committed");
  if (!table.schema()->Equals(*state_->writer->schema(), false)) {
    throw Error(state_->path + ": cannot append columns " + table.schema()->ToString() + " to a file of " +
                state_->writer->schema()->ToString());
  }
  try {
    check(state_->writer->WriteTable(table, 64 * 1024), state_->path, "cannot write Parquet");
  } catch (const parquet::ParquetException& e) {
    throw Error(state_->path + ": cannot write Parquet: " + e.what());
  }
}

void ParquetTableWriter::commit() {
  if (!state_->writer) throw Error(state_->path + ": committed twice");
  try {
    check(state_->writer->Close(), state_->path, "cannot write Parquet");
  } catch (const parquet::ParquetException& e) {
    throw Error(state_->path + ": cannot write Parquet: " + e.what());
  }
  state_->writer.reset();
  check(state_->sink->Close(), state_->path, "cannot close");
  state_->file.commit();
}

void write_parquet_table(const arrow::Table& table, const std::string& path) {
  ParquetTableWriter writer(path, table.schema());
  writer.write(table);
  writer.commit();
}

std::shared_ptr<arrow::Table> bars_to_table(const BarSet& bars) {
  arrow::TimestampBuilder ts(arrow::timestamp(arrow::TimeUnit::NANO, "UTC"), arrow::default_memory_pool());
  arrow::StringBuilder symbol;
  arrow::DoubleBuilder open, high, low, close, volume;
  // The declared columns by kind, reals then categoricals, as the series hold them; a
  // categorical is written as its level names.
  const auto& d = bars.declared;
  const std::vector<std::string> observed = d.observed_columns(), known = d.known_columns(),
                                 statics = d.static_columns();
  const size_t n_declared = observed.size() + known.size() + statics.size();
  std::vector<arrow::DoubleBuilder> declared(n_declared);
  std::vector<arrow::StringBuilder> levels(n_declared);
  std::vector<uint8_t> categorical;
  for (const auto& [reals, categoricals] :
       {std::pair{&d.observed, &d.observed_categorical}, std::pair{&d.known, &d.known_categorical},
        std::pair{&d.statics, &d.static_categorical}}) {
    categorical.insert(categorical.end(), reals->size(), 0);
    categorical.insert(categorical.end(), categoricals->size(), 1);
  }
  arrow::DoubleBuilder target;  // another target column than the close
  const std::string where = "writing bars";
  for (const auto& s : bars.series) {
    if (s.declared_observed.size() != observed.size() || s.declared_known.size() != known.size() ||
        s.declared_static.size() != statics.size()) {
      throw Error(where + ": symbol '" + s.symbol + "' lacks some of the declared input columns");
    }
    for (size_t i = 0; i < s.size(); ++i) {
      check(ts.Append(s.timestamp_ns[i]), where, "timestamp");
      check(symbol.Append(s.symbol), where, "symbol");
      check(close.Append(s.close[i]), where, "close");
      if (bars.fields.has(BarField::OpenHighLow)) {
        check(open.Append(s.open[i]), where, "open");
        check(high.Append(s.high[i]), where, "high");
        check(low.Append(s.low[i]), where, "low");
      }
      if (bars.fields.has(BarField::Volume)) check(volume.Append(s.volume[i]), where, "volume");
      size_t c = 0;
      for (const auto& [columns, names] :
           {std::pair{&s.declared_observed, &s.observed_levels}, std::pair{&s.declared_known, &s.known_levels},
            std::pair{&s.declared_static, &s.static_levels}}) {
        for (size_t k = 0; k < columns->size(); ++k, ++c) {
          const double v = (*columns)[k][i];
          if (!categorical[c]) {
            check(declared[c].Append(v), where, "a declared input");
          } else {
            check(levels[c].Append(names->at(k).at(static_cast<size_t>(v))), where, "a categorical input");
          }
        }
      }
      if (!s.target_values.empty()) check(target.Append(s.target_values[i]), where, "the target");
    }
  }
  std::vector<std::shared_ptr<arrow::Field>> fields;
  std::vector<std::shared_ptr<arrow::Array>> arrays;
  auto add = [&](const std::string& name, arrow::ArrayBuilder& builder) {
    auto array = unwrap(builder.Finish(), where, name);
    fields.push_back(arrow::field(name, array->type(), false));
    arrays.push_back(array);
  };
  add("timestamp", ts);
  add("symbol", symbol);
  if (bars.fields.has(BarField::OpenHighLow)) {
    add("open", open);
    add("high", high);
    add("low", low);
  }
  add("close", close);
  if (bars.fields.has(BarField::Volume)) add("volume", volume);
  size_t c = 0;
  for (const auto* names : {&observed, &known, &statics}) {
    for (const auto& name : *names) {
      if (categorical[c]) {
        add(name, levels[c]);
      } else {
        add(name, declared[c]);
      }
      ++c;
    }
  }
  // Once, even when the target column is an input or a bar column too.
  const auto& target_name = bars.declared.target.column;
  if (target.length() > 0 &&
      std::none_of(fields.begin(), fields.end(), [&](const auto& f) { return f->name() == target_name; })) {
    add(target_name, target);
  }
  return arrow::Table::Make(arrow::schema(fields), arrays);
}

void write_csv_table(const arrow::Table& table, const std::string& path) {
  io::AtomicFile file(path);
  auto sink = unwrap(arrow::io::FileOutputStream::Open(file.temp_path().string()), path, "cannot create");
  check(arrow::csv::WriteCSV(table, arrow::csv::WriteOptions::Defaults(), sink.get()), path, "cannot write CSV");
  check(sink->Close(), path, "cannot close");
  file.commit();
}

BarSet read_bars_parquet(const std::string& path, const BarReadOptions& options) {
  return bars_from_table(*read_parquet_table(path), path, options);
}

BarSet read_bars_csv(const std::string& path, const BarReadOptions& options) {
  return bars_from_table(*read_csv_table(path), path, options);
}

void write_bars_parquet(const BarSet& bars, const std::string& path) {
  write_parquet_table(*bars_to_table(bars), path);
}

void write_bars_csv(const BarSet& bars, const std::string& path) { write_csv_table(*bars_to_table(bars), path); }

}  // namespace qtft::data
