// The feature store: built in three streaming passes so that memory follows the largest
// file and the longest series, never the row count.
//   1. each source file's bars are validated and spilled to a scratch file, by series;
//   2. the normalization statistics are fitted series by series (training split only);
//   3. each series' features are computed and appended to the store.
// Passes 2 and 3 run the same functions as Dataset::build on the same series in the same
// order, so a store's features are bitwise those of the in-memory path.
#include "qtft/data/feature_store.h"

#include <arrow/table.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "qtft/common/detail/fingerprint.h"
#include "qtft/common/error.h"
#include "qtft/data/arrow_bars.h"
#include "qtft/data/detail/feature_spec_json.h"
#include "qtft/data/detail/feature_store_parts.h"
#include "qtft/data/detail/features.h"
#include "qtft/data/parquet_dataset.h"
#include "qtft/io/atomic_file.h"
#include "qtft/io/detail/mapped_file.h"

namespace qtft::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kHeadMagic[8] = {'Q', 'T', 'F', 'S', 'T', 'O', 'R', '1'};
constexpr char kTailMagic[8] = {'Q', 'T', 'F', 'S', 'E', 'N', 'D', '1'};
constexpr size_t kAlign = 64;
constexpr size_t kFooterBytes = 24;
constexpr uint64_t kMaxIndexBytes = uint64_t{256} << 20;
// 2: the calendar's terms follow the bars' spacing (a store of daily bars built before
// holds time of day).
constexpr int kFormatVersion = 2;
constexpr const char* kExtension = ".qtfs";

// Appends arrays to a file, each at an aligned offset; errors (a full disk) name the file.
class ArrayWriter {
 public:
  ArrayWriter(const fs::path& path, const std::string& shown) : shown_(shown) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) fail("cannot create");
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  }
  ~ArrayWriter() {
    if (file_) std::fclose(file_);
  }
  ArrayWriter(const ArrayWriter&) = delete;
  ArrayWriter& operator=(const ArrayWriter&) = delete;

  template <class T>
  uint64_t append(std::span<const T> values) {
    pad();
    const uint64_t at = offset_;
    write(values.data(), values.size_bytes());
    return at;
  }
  void write(const void* data, size_t bytes) {
    if (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes) fail("cannot write");
    offset_ += bytes;
  }
  void pad() {
    static constexpr char zeros[kAlign] = {};
    write(zeros, (kAlign - offset_ % kAlign) % kAlign);
  }
  uint64_t offset() const { return offset_; }
  // Room for an array of `bytes`, aligned as append() aligns, to be filled by write_at():
  // a long series' features are computed part by part, each part filling its rows.
  uint64_t reserve(uint64_t bytes) {
    pad();
    const uint64_t at = offset_;
    offset_ += bytes;
    if (std::fseek(file_, static_cast<long>(offset_), SEEK_SET) != 0) fail("cannot write");
    return at;
  }
  template <class T>
  void write_at(uint64_t at, std::span<const T> values) {
    if (std::fflush(file_) != 0) fail("cannot write");
    const auto* from = reinterpret_cast<const char*>(values.data());
    for (size_t done = 0, bytes = values.size_bytes(); done < bytes;) {
      const ssize_t n = ::pwrite(fileno(file_), from + done, bytes - done, static_cast<off_t>(at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write");
      done += static_cast<size_t>(n);
    }
  }
  void close() {
    const bool ok = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    if (!ok) {
      errno = err;
      fail("cannot write");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    const std::string reason = std::strerror(errno);
    throw Error(shown_ + ": " + what + " the feature store: " + reason);
  }
  std::string shown_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
};

// ---- what a store is built from ----

// `declared`: the declaration resolved against the source's columns, so that a glob and the
// names it matches (a model's spec) are one store.
json read_options_json(const BarReadOptions& r, const DeclaredColumns& declared) {
  const auto& c = r.columns;
  json out{{"timestamp", c.timestamp},
           {"open", c.open},
           {"high", c.high},
           {"low", c.low},
           {"close", c.close},
           {"volume", c.volume},
           {"symbol", c.symbol},
           {"symbol_name", r.symbol},
           {"epoch_unit", static_cast<int>(r.epoch_unit)}};
  // Only when declared: stores of derived inputs keep the fingerprints they had.
  if (!declared.empty()) {
    out["inputs"] = {{"observed", declared.observed}, {"known", declared.known}};
    for (const auto& [key, list] :
         {std::pair{"static", &declared.statics}, std::pair{"observed_categorical", &declared.observed_categorical},
          std::pair{"known_categorical", &declared.known_categorical},
          std::pair{"static_categorical", &declared.static_categorical}}) {
      if (!list->empty()) out["inputs"][key] = *list;
    }
    if (declared.missing == MissingValues::ForwardFill) out["inputs"]["missing"] = "forward-fill";
  }
  if (!declared.calendar_timezone.empty()) out["calendar_timezone"] = declared.calendar_timezone;
  // Only when named (--calendar): otherwise the bars' spacing chooses it, a function of the files.
  if (declared.calendar) {
    out["calendar"] = json::array();
    for (CalendarTerm term : *declared.calendar) out["calendar"].push_back(calendar_term_name(term));
  }
  if (const auto& t = declared.target; !t.is_default()) {
    out["target"] = {{"column", t.column},
                     {"transform", target_transform_name(t.transform)},
                     {"normalize", normalization_name(t.normalize)}};
  }
  return out;
}

// The source's column names resolved against its declaration (the first file of a folder:
// every file has its columns).
DeclaredColumns declared_columns(const BarSource& source) {
  if (source.read.inputs.empty()) return without_columns(source.read.inputs, describe_source(source));
  // A CSV has no footer to read a schema from: Arrow reads the table, the bars are not built.
  if (!source.csv_file.empty())
    return resolve_declared_inputs(*read_csv_table(source.csv_file)->schema(), source.read, source.csv_file);
  std::string file = source.parquet_file;
  if (source.is_dataset_folder()) file = list_parquet_dataset(source.parquet_file, source.read).front().path;
  return resolve_declared_inputs(*read_parquet_schema(file), source.read, file);
}

json file_json(const std::string& path, const fs::path& relative_to, int64_t size, int64_t mtime) {
  return {{"path", fs::path(path).lexically_relative(relative_to).string()}, {"size", size}, {"modified_ns", mtime}};
}

// The source's files; a folder is listed through Arrow's dataset discovery.
json source_files(const BarSource& source) {
  json files = json::array();
  if (source.is_dataset_folder()) {
    const auto base = fs::absolute(source.parquet_file).lexically_normal();
    for (const auto& f : list_parquet_dataset(source.parquet_file, source.read)) {
      files.push_back(file_json(f.path, base, f.size_bytes, f.modified_ns));
    }
    return files;
  }
  const std::string path = source.parquet_file.empty() ? source.csv_file : source.parquet_file;
  std::error_code ec;
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  if (ec) throw Error(path + ": no such file");
  const auto mtime = fs::last_write_time(path, ec).time_since_epoch();
  files.push_back(file_json(fs::absolute(path).string(), "/", size,
                            std::chrono::duration_cast<std::chrono::nanoseconds>(mtime).count()));
  return files;
}

// The source's absolute path, without a trailing separator: "bars/" and "bars" are one source.
std::string absolute_source(const BarSource& source) {
  std::string path =
      fs::absolute(source.parquet_file.empty() ? source.csv_file : source.parquet_file).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

// `files`: source_files(source), listed once by callers that need several fingerprints.
json fingerprint(const BarSource& source, const json& files, const DeclaredColumns& declared,
                 const DatasetOptions& options, const FeatureSpec* saved) {
  json fp{{"version", kFormatVersion},
          {"source", absolute_source(source)},
          {"format", source.parquet_file.empty() ? "csv" : "parquet"},
          {"files", files},
          {"columns", read_options_json(source.read, declared)},
          {"windows", to_json(options)},
          {"saved_spec", saved ? to_json(*saved) : json(nullptr)}};
  // Only when cut: the stores of whole sources keep the fingerprints they had.
  if (source.is_cut()) fp["bars_between"] = {source.from_ns, source.through_ns};
  if (!source.series_from_ns.empty()) fp["series_from"] = source.series_from_ns;
  return fp;
}

// FNV-1a: names the file only; the whole fingerprint inside the store is what is compared.
std::string fingerprint_name(const json& fp) { return fnv1a64_hex(fp.dump()); }

// ---- reading a store ----

// `bytes` bytes of `fd` at `offset` into `to`; a failure is an Error starting with `what`.
void read_fully(int fd, uint64_t offset, size_t bytes, void* to, const std::string& what) {
  auto* out = static_cast<char*>(to);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, out, bytes, static_cast<off_t>(offset));
    if (n <= 0) throw Error(what + ": " + (n == 0 ? std::string("the file ended early") : std::strerror(errno)));
    out += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
}

// The store mapped (for the views) and open (for reading batches with pread: the kernel
// maps whole page-cache folios into a process on a fault, so gathering windows from the
// mapping would make the resident set grow with the store).
struct MappedStore {
  io::MappedFile file;
  int fd = -1;
  json index;
  explicit MappedStore(const fs::path& path) : file(path, io::MappedFile::Access::Random) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path.string() + ": cannot open: " + std::strerror(errno));
  }
  ~MappedStore() { ::close(fd); }
  MappedStore(const MappedStore&) = delete;
  MappedStore& operator=(const MappedStore&) = delete;

  void read(const void* from, size_t bytes, void* to) const {
    const auto offset = static_cast<uint64_t>(static_cast<const std::byte*>(from) - file.bytes().data());
    read_fully(fd, offset, bytes, to, file.path().string() + ": cannot read the feature store");
  }
};

[[noreturn]] void corrupt(const std::string& path, const std::string& what) {
  throw Error(path + ": not a complete qtft feature store (" + what + "); delete it to rebuild it");
}

std::shared_ptr<MappedStore> open_store(const std::string& path) {
  auto store = std::make_shared<MappedStore>(path);
  const auto bytes = store->file.bytes();
  if (bytes.size() < sizeof kHeadMagic + kFooterBytes || std::memcmp(bytes.data(), kHeadMagic, 8) != 0) {
    corrupt(path, "no store header");
  }
  const std::byte* footer = bytes.data() + bytes.size() - kFooterBytes;
  if (std::memcmp(footer + 16, kTailMagic, 8) != 0) corrupt(path, "no store footer: truncated?");
  uint64_t index_offset = 0, index_size = 0;
  std::memcpy(&index_offset, footer, 8);
  std::memcpy(&index_size, footer + 8, 8);
  if (index_size > kMaxIndexBytes || index_offset < sizeof kHeadMagic ||
      index_offset + index_size != bytes.size() - kFooterBytes) {
    corrupt(path, "index out of bounds");
  }
  try {
    const char* text = reinterpret_cast<const char*>(bytes.data() + index_offset);
    store->index = json::parse(text, text + index_size);
  } catch (const json::exception& e) {
    corrupt(path, std::string("index: ") + e.what());
  }
  return store;
}

template <class T>
std::span<const T> array_at(const MappedStore& store, const json& entry, const char* name, uint64_t count,
                            const std::string& path) {
  const uint64_t offset = entry.at(name).get<uint64_t>();
  const uint64_t end_of_data = store.index.at("data_bytes").get<uint64_t>();
  if (offset % alignof(T) != 0 || offset < sizeof kHeadMagic || count > end_of_data / sizeof(T) ||
      offset > end_of_data - count * sizeof(T)) {
    corrupt(path, std::string("array '") + name + "' out of bounds");
  }
  return {reinterpret_cast<const T*>(store.file.bytes().data() + offset), count};
}

Dataset dataset_over(std::shared_ptr<MappedStore> store, const std::string& path) {
  const json& index = store->index;
  if (index.value("format", "") != "qtft-feature-store" || index.value("version", 0) != kFormatVersion) {
    corrupt(path, "another format or version");
  }
  DatasetOptions options;
  FeatureSpec spec;
  std::vector<SeriesView> views;
  ReadNotes notes;
  try {
    options = dataset_options_from_json(index.at("windows"));
    spec = feature_spec_from_json(index.at("spec"));
    const uint64_t n_obs = spec.observed.size(), n_known = spec.known.size(), n_static = spec.statics.size();
    for (const auto& e : index.at("series")) {
      SeriesView v;
      v.symbol = e.at("symbol").get<std::string>();
      v.symbol_id = e.at("symbol_id").get<int64_t>();
      const auto rows = e.at("rows").get<uint64_t>();
      v.split_bounds = e.at("split_bounds").get<std::array<int64_t, 4>>();
      v.first_bar_ns = e.at("first_bar_ns").get<int64_t>();
      if (v.symbol_id < 0 || static_cast<size_t>(v.symbol_id) >= spec.symbols.size() || v.split_bounds[0] != 0 ||
          v.split_bounds[1] < 0 || v.split_bounds[1] > v.split_bounds[2] || v.split_bounds[2] > v.split_bounds[3] ||
          static_cast<uint64_t>(v.split_bounds[3]) != rows) {
        corrupt(path, "series '" + v.symbol + "' has inconsistent bounds");
      }
      v.timestamp_ns = array_at<int64_t>(*store, e, "timestamp_ns", rows, path);
      v.close = array_at<double>(*store, e, "close", rows, path);
      v.observed = array_at<float>(*store, e, "observed", rows * n_obs, path);
      v.known = array_at<float>(*store, e, "known", rows * n_known, path);
      v.target = array_at<float>(*store, e, "target", rows, path);
      if (n_static > 0) v.statics = array_at<float>(*store, e, "statics", n_static, path);
      notes.unknown_category_rows += e.value("unknown_category_rows", int64_t{0});
      views.push_back(std::move(v));
    }
    notes.unused_columns = index.value("unused_columns", std::vector<std::string>{});
    notes.leading_null_rows = index.value("leading_null_rows", int64_t{0});
  } catch (const json::exception& e) {
    corrupt(path, std::string("index: ") + e.what());
  }
  const std::string source = index.at("fingerprint").value("source", path);
  auto reader = [store = store.get()](const void* from, size_t bytes, void* to) { store->read(from, bytes, to); };
  Dataset d = Dataset::over(options, std::move(spec), source, std::move(views), std::move(store), reader);
  d.set_notes(std::move(notes));
  return d;
}

// ---- building a store ----

// Pass 1's spill: each file's series, column by column, and where each chunk lies.
struct SpilledChunk {
  size_t series = 0;
  uint64_t rows = 0;
  uint64_t timestamp = 0, close = 0, open = 0, high = 0, low = 0, volume = 0, target = 0;
  std::vector<uint64_t> declared;  // observed columns, then known, then static
};

struct Spill {
  BarFields fields;
  BarSpacing spacing;  // every gap of every series, across parts too
  DeclaredColumns declared;
  // Each series' categorical levels: its latest part's, which holds every earlier part's
  // levels at the same indices (the parts of a source share one DeclaredCarry).
  struct Levels {
    std::vector<std::vector<std::string>> observed, known, statics;
  };
  std::vector<Levels> levels;
  int64_t leading_null_rows = 0;
  std::vector<std::string> symbols;
  std::vector<SpilledChunk> chunks;
  std::string source;
};

template <class T>
void append_column(ArrayWriter& out, const std::vector<T>& values, uint64_t& offset) {
  offset = out.append(std::span<const T>(values));
}

Spill spill_bars(const BarSource& source, ArrayWriter& out) {
  Spill spill;
  spill.source = source.parquet_file.empty() ? source.csv_file : source.parquet_file;
  SeriesAssembly assembly;
  // A cut source's store holds its bars only (for_each_bar_part cuts each part).
  bool first = true;
  std::vector<std::optional<int64_t>> last_bar_ns;  // each series' so far
  for_each_bar_part(source, [&](const BarSet& part) {
    if (first) {
      spill.fields = part.fields;
      spill.declared = part.declared;
    }
    const auto where = assembly.place(part);
    spill.leading_null_rows += part.leading_null_rows;
    for (size_t j = 0; j < part.series.size(); ++j) {
      const auto& s = part.series[j];
      if (spill.levels.size() <= where[j]) spill.levels.resize(where[j] + 1);
      spill.levels[where[j]] = {s.observed_levels, s.known_levels, s.static_levels};
      if (last_bar_ns.size() <= where[j]) last_bar_ns.resize(where[j] + 1);
      spill.spacing.add(s.timestamp_ns, last_bar_ns[where[j]]);
      if (!s.timestamp_ns.empty()) last_bar_ns[where[j]] = s.timestamp_ns.back();
      SpilledChunk c;
      c.series = where[j];
      c.rows = s.size();
      append_column(out, s.timestamp_ns, c.timestamp);
      append_column(out, s.close, c.close);
      if (spill.fields.has(BarField::OpenHighLow)) {
        append_column(out, s.open, c.open);
        append_column(out, s.high, c.high);
        append_column(out, s.low, c.low);
      }
      if (spill.fields.has(BarField::Volume)) append_column(out, s.volume, c.volume);
      if (!spill.declared.target.column.empty()) append_column(out, s.target_values, c.target);
      for (const auto* columns : {&s.declared_observed, &s.declared_known, &s.declared_static}) {
        for (const auto& column : *columns) append_column(out, column, c.declared.emplace_back());
      }
      spill.chunks.push_back(std::move(c));
    }
    first = false;
  });
  spill.symbols = assembly.symbols();
  return spill;
}

// Reads the spill back with pread: its pages stay in the page cache, out of this process's
// resident set, which then holds one series at a time whatever the spill's size.
class SpillReader {
 public:
  SpillReader(const fs::path& path, const std::string& shown) : shown_(shown) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(shown_ + ": cannot read back the feature store's scratch file: " + std::strerror(errno));
  }
  ~SpillReader() { ::close(fd_); }
  SpillReader(const SpillReader&) = delete;
  SpillReader& operator=(const SpillReader&) = delete;

  // Values [skip, skip + rows) of the array at `offset`, appended to `column`.
  template <class T>
  void append(std::vector<T>& column, uint64_t offset, uint64_t skip, uint64_t rows) const {
    const size_t at = column.size();
    column.resize(at + rows);
    read_fully(fd_, offset + skip * sizeof(T), rows * sizeof(T), column.data() + at,
               shown_ + ": cannot read back the feature store's scratch file");
  }

 private:
  std::string shown_;
  int fd_ = -1;
};

// Bars [begin, end) of one series again, from its chunks in the spill, into `s` (its
// buffers reused).
const BarSeries& spilled_bars(const Spill& spill, const SpillReader& file, size_t series, uint64_t begin, uint64_t end,
                              BarSeries& s) {
  s.symbol = spill.symbols[series];
  const uint64_t rows = end - begin;
  for (auto* column : {&s.close, &s.open, &s.high, &s.low, &s.volume, &s.target_values}) {
    column->clear();
    column->reserve(rows);
  }
  s.timestamp_ns.clear();
  s.timestamp_ns.reserve(rows);
  s.declared_observed.resize(spill.declared.observed_columns().size());
  s.declared_known.resize(spill.declared.known_columns().size());
  s.declared_static.resize(spill.declared.static_columns().size());
  s.observed_levels = spill.levels[series].observed;
  s.known_levels = spill.levels[series].known;
  s.static_levels = spill.levels[series].statics;
  for (auto* columns : {&s.declared_observed, &s.declared_known, &s.declared_static}) {
    for (auto& column : *columns) {
      column.clear();
      column.reserve(rows);
    }
  }
  uint64_t at = 0;  // the series' bar where chunk c starts
  for (const auto& c : spill.chunks) {
    if (c.series != series) continue;
    const uint64_t from = std::max(begin, at), to = std::min(end, at + c.rows);
    if (from < to) {
      const uint64_t skip = from - at, n = to - from;
      file.append(s.timestamp_ns, c.timestamp, skip, n);
      file.append(s.close, c.close, skip, n);
      if (spill.fields.has(BarField::OpenHighLow)) {
        file.append(s.open, c.open, skip, n);
        file.append(s.high, c.high, skip, n);
        file.append(s.low, c.low, skip, n);
      }
      if (spill.fields.has(BarField::Volume)) file.append(s.volume, c.volume, skip, n);
      if (!spill.declared.target.column.empty()) file.append(s.target_values, c.target, skip, n);
      size_t k = 0;
      for (auto* columns : {&s.declared_observed, &s.declared_known, &s.declared_static}) {
        for (auto& column : *columns) file.append(column, c.declared[k++], skip, n);
      }
    }
    at += c.rows;
    if (at >= end) break;
  }
  return s;
}

// Rows featurized at once when none are asked for: a part's bars and raw features in double
// and its features in float come to about this many bytes, whatever the series' length.
constexpr uint64_t kPartBytes = 64ull << 20;

uint64_t default_part_rows(const DeclaredColumns& declared) {
  // The bars' own columns and the derived inputs, about a dozen, and the declared columns.
  const uint64_t columns =
      12 + declared.observed_columns().size() + declared.known_columns().size() + declared.static_columns().size();
  return std::max<uint64_t>(4096, kPartBytes / (columns * (8 + 8 + 4)));
}

// Visits series `series` part by part, `part_rows` rows a part: bars [b, b + part_rows + 1)
// for b = 0, part_rows, ..., each part holding the bar before its first row.
template <class Visit>
void for_each_part(const Spill& spill, const SpillReader& file, size_t series, uint64_t series_bars, uint64_t part_rows,
                   BarSeries& bars, Visit&& visit) {
  for (uint64_t b = 0;; b += part_rows) {
    const uint64_t e = std::min(b + part_rows + 1, series_bars);
    visit(spilled_bars(spill, file, series, b, e, bars), b);
    if (e >= series_bars) break;
  }
}

StorePreparation build_store(const BarSource& source, const DatasetOptions& options, const FeatureSpec* saved,
                             const json& fp, const fs::path& path, uint64_t part_rows) {
  const auto start = std::chrono::steady_clock::now();
  io::AtomicFile store_file(path);
  const std::string shown = path.string();
  StorePreparation out;
  out.path = shown;
  {
    // The spill is a temporary of the store's own name: never committed, removed on the way out.
    io::AtomicFile spill_file(fs::path(shown + ".bars"));
    Spill spill;
    {
      ArrayWriter spill_out(spill_file.temp_path(), shown);
      spill = spill_bars(source, spill_out);
      spill_out.close();
    }
    const SpillReader spilled(spill_file.temp_path(), shown);
    std::vector<uint64_t> series_bars(spill.symbols.size());
    for (const auto& c : spill.chunks) series_bars[c.series] += c.rows;
    if (part_rows == 0) part_rows = default_part_rows(spill.declared);
    auto rows_of = [&](size_t i) { return static_cast<int64_t>(series_bars[i] > 0 ? series_bars[i] - 1 : 0); };

    // Buffers kept from part to part and series to series: allocating hundreds of MB per
    // series and handing them back cost more in page faults than computing the features.
    BarSeries bars;
    RawFeatures raw;
    SeriesFeatures f;
    FeaturePlan plan = plan_features(spill.fields, spill.spacing, spill.declared, saved, spill.source);
    if (!saved) {
      SpecFitter fitter(plan.derived, plan.declared, options);
      for (size_t i = 0; i < spill.symbols.size(); ++i) {
        for_each_part(spill, spilled, i, series_bars[i], part_rows, bars,
                      [&](const BarSeries& part, uint64_t first_row) { fitter.add_part(part, first_row, rows_of(i)); });
      }
      plan.spec = fitter.finish();
    }

    ArrayWriter out_file(store_file.temp_path(), shown);
    out_file.write(kHeadMagic, sizeof kHeadMagic);
    json series = json::array();
    const uint64_t observed_width = plan.spec.observed.size(), known_width = plan.spec.known.size();
    for (size_t i = 0; i < spill.symbols.size(); ++i) {
      const auto rows = static_cast<uint64_t>(rows_of(i));
      out.bars += static_cast<int64_t>(series_bars[i]);
      // The series' arrays are laid out as whole-series appends would lay them; each part
      // fills its rows of each.
      const uint64_t timestamp_at = out_file.reserve(rows * sizeof(int64_t));
      const uint64_t close_at = out_file.reserve(rows * sizeof(double));
      const uint64_t observed_at = out_file.reserve(rows * observed_width * sizeof(float));
      const uint64_t known_at = out_file.reserve(rows * known_width * sizeof(float));
      const uint64_t target_at = out_file.reserve(rows * sizeof(float));
      json entry;
      int64_t unknown_category_rows = 0;
      std::vector<float> statics;
      for_each_part(spill, spilled, i, series_bars[i], part_rows, bars, [&](const BarSeries& part, uint64_t first_row) {
        // featurize_series has checked the widths against the spec.
        dataset_series(part, i, spill.symbols.size(), plan, options, spill.source, raw, f);
        if (first_row == 0) {
          entry = {{"symbol", f.symbol}, {"symbol_id", f.symbol_id}, {"first_bar_ns", f.first_bar_ns}};
          statics = f.statics;
        }
        out_file.write_at(timestamp_at + first_row * sizeof(int64_t), std::span<const int64_t>(f.timestamp_ns));
        out_file.write_at(close_at + first_row * sizeof(double), std::span<const double>(f.close));
        out_file.write_at(observed_at + first_row * observed_width * sizeof(float), std::span<const float>(f.observed));
        out_file.write_at(known_at + first_row * known_width * sizeof(float), std::span<const float>(f.known));
        out_file.write_at(target_at + first_row * sizeof(float), std::span<const float>(f.target));
        unknown_category_rows += f.unknown_category_rows;
      });
      entry["rows"] = rows;
      entry["split_bounds"] = split_bounds(static_cast<int64_t>(rows), options);
      entry["timestamp_ns"] = timestamp_at;
      entry["close"] = close_at;
      entry["observed"] = observed_at;
      entry["known"] = known_at;
      entry["target"] = target_at;
      if (!statics.empty()) entry["statics"] = out_file.append(std::span<const float>(statics));
      if (unknown_category_rows > 0) entry["unknown_category_rows"] = unknown_category_rows;
      series.push_back(std::move(entry));
    }
    out_file.pad();
    const uint64_t data_bytes = out_file.offset();
    json index{{"format", "qtft-feature-store"},
               {"version", kFormatVersion},
               {"fingerprint", fp},
               {"windows", to_json(options)},
               {"spec", to_json(plan.spec)},
               {"bars", out.bars},
               {"data_bytes", data_bytes},
               {"series", series}};
    if (!spill.declared.unused.empty()) index["unused_columns"] = spill.declared.unused;
    if (spill.leading_null_rows > 0) index["leading_null_rows"] = spill.leading_null_rows;
    const std::string text = index.dump();
    out_file.write(text.data(), text.size());
    const uint64_t index_size = text.size();
    out_file.write(&data_bytes, 8);
    out_file.write(&index_size, 8);
    out_file.write(kTailMagic, 8);
    out_file.close();
    out.series = static_cast<int64_t>(spill.symbols.size());
  }
  store_file.commit();
  out.built = true;
  out.bytes = static_cast<int64_t>(fs::file_size(path));
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// Why no store matched: what changed against the newest store of the same source.
std::string why_rebuilt(const fs::path& folder, const json& fp) {
  std::error_code ec;
  fs::path newest;
  fs::file_time_type newest_time{};
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    if (entry.path().extension() != kExtension) continue;
    if (newest.empty() || entry.last_write_time(ec) > newest_time) {
      newest = entry.path();
      newest_time = entry.last_write_time(ec);
    }
  }
  if (newest.empty()) return "no store yet";
  json old;
  try {
    old = open_store(newest.string())->index.at("fingerprint");
  } catch (const std::exception&) {
    return "the store there (" + newest.filename().string() + ") is unreadable";
  }
  const std::string shown = newest.filename().string();
  if (old.value("source", "") != fp.value("source", "")) return "the stores there are of other sources";
  if (old.at("files") != fp.at("files")) {
    size_t added = 0, removed = 0, changed = 0;
    std::map<std::string, json> before;
    for (const auto& f : old.at("files")) before[f.at("path").get<std::string>()] = f;
    for (const auto& f : fp.at("files")) {
      auto it = before.find(f.at("path").get<std::string>());
      if (it == before.end()) {
        ++added;
      } else {
        changed += it->second != f;
        before.erase(it);
      }
    }
    removed = before.size();
    return "the source's files changed since " + shown + " was built (" + std::to_string(added) + " added, " +
           std::to_string(removed) + " removed, " + std::to_string(changed) + " modified)";
  }
  return shown + " was built with other options (columns, windows, splits or a model's features)";
}

// The store named by `fp` in `folder`, when one exists and was built from exactly that.
std::optional<StorePreparation> find_store(const fs::path& folder, const json& fp, json* spec = nullptr) {
  const fs::path path = folder / (fingerprint_name(fp) + kExtension);
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  auto store = open_store(path.string());
  if (store->index.value("fingerprint", json()) != fp) return std::nullopt;
  StorePreparation out;
  out.path = path.string();
  out.reason = "reused: built from these files with these options";
  out.bars = store->index.value("bars", int64_t{0});
  out.series = static_cast<int64_t>(store->index.value("series", json::array()).size());
  out.bytes = static_cast<int64_t>(fs::file_size(path, ec));
  if (spec) *spec = store->index.at("spec");
  return out;
}

// Says so when the store is not where a user would look for it (next to the data).
StorePreparation with_note(StorePreparation store, const BarSource& source) {
  if (const auto note = source.feature_store_note(); !note.empty()) store.reason += "; " + note;
  return store;
}

std::string store_folder_of(const BarSource& source) {
  const std::string folder = source.feature_store_folder();
  if (folder.empty()) {
    throw UsageError("no feature store for " + describe_source(source) +
                     ": give a dataset folder or --feature-store FOLDER");
  }
  return folder;
}

}  // namespace

BarSource with_model_inputs(BarSource source, const FeatureSpec& spec) {
  source.read.inputs = declaration_of(spec);
  return source;
}

namespace {
// Both entry points' work: find the store, or build it in parts of `part_rows` rows.
StorePreparation prepare(const BarSource& given, const DatasetOptions& options, const FeatureSpec* saved,
                         StoreAccess access, uint64_t part_rows);
}  // namespace

StorePreparation prepare_feature_store(const BarSource& given, const DatasetOptions& options, const FeatureSpec* saved,
                                       StoreAccess access) {
  return prepare(given, options, saved, access, 0);
}

StorePreparation detail::prepare_feature_store_in_parts(const BarSource& source, const DatasetOptions& options,
                                                        const FeatureSpec* saved, uint64_t part_rows) {
  return prepare(source, options, saved, StoreAccess::BuildIfNeeded, part_rows);
}

namespace {

StorePreparation prepare(const BarSource& given, const DatasetOptions& options, const FeatureSpec* saved,
                         StoreAccess access, uint64_t part_rows) {
  options.validate();
  const BarSource source = saved ? with_model_inputs(given, *saved) : given;
  const fs::path folder = store_folder_of(source);
  const json files = source_files(source);
  const DeclaredColumns declared = declared_columns(source);
  if (saved) {
    // A model trained from this source carries the fitted store's own statistics: that
    // store serves it as is, rather than a second store of the same numbers.
    json fitted_spec;
    if (auto fitted = find_store(folder, fingerprint(source, files, declared, options, nullptr), &fitted_spec);
        fitted && fitted_spec == to_json(*saved)) {
      return with_note(*fitted, source);
    }
  }
  const json fp = fingerprint(source, files, declared, options, saved);
  if (auto found = find_store(folder, fp)) return with_note(*found, source);
  const fs::path path = folder / (fingerprint_name(fp) + kExtension);
  if (access == StoreAccess::MustExist) {
    throw Error(path.string() + ": the feature store is missing: the rank that builds it did not");
  }
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw Error(folder.string() + ": cannot create the feature store folder: " + ec.message());
  std::string reason = why_rebuilt(folder, fp);
  auto out = build_store(source, options, saved, fp, path, part_rows);
  out.reason = "built: " + reason;
  return with_note(std::move(out), source);
}

}  // namespace

Dataset map_feature_store(const std::string& path) { return dataset_over(open_store(path), path); }

Dataset open_dataset(const BarSource& source, const DatasetOptions& options, const FeatureSpec* saved,
                     StoreAccess access, const std::function<void(const StorePreparation&)>& prepared) {
  if (source.feature_store_folder().empty()) {
    const BarSet bars = load_bars(saved ? with_model_inputs(source, *saved) : source);
    return saved ? Dataset::build(bars, options, *saved) : Dataset::build(bars, options);
  }
  const auto store = prepare_feature_store(source, options, saved, access);
  if (prepared) prepared(store);
  return map_feature_store(store.path);
}

}  // namespace qtft::data
