// The feature store: built in three streaming passes so that memory follows the largest
// file and the longest series, never the row count.
//   1. each source file's bars are validated and spilled to a scratch file, by series;
//   2. the normalization statistics are fitted series by series (training split only);
//   3. each series' features are computed and appended to the store.
// Passes 2 and 3 run the same functions as Dataset::build on the same series in the same
// order, so a store's features are bitwise those of the in-memory path.
#include "qtft/data/store/feature_store.h"

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
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/features/detail/features.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/store/detail/feature_store_parts.h"
#include "qtft/data/store/detail/store_format.h"
#include "qtft/io/atomic_file.h"
#include "qtft/io/detail/mapped_file.h"

namespace qtft::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- what a store is built from ----

// `declared`: the declaration resolved against the source's columns, so that a glob and the
// names it matches (a model's spec) are one store.
json read_options_json(const BarReadOptions& r, const InputDeclaration& declared) {
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
InputDeclaration declared_columns(const BarSource& source) {
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
json fingerprint(const BarSource& source, const json& files, const InputDeclaration& declared,
                 const DatasetOptions& options, const InputSchema* saved) {
  json fp{{"version", kFormatVersion},
          {"source", absolute_source(source)},
          {"format", source.parquet_file.empty() ? "csv" : "parquet"},
          {"files", files},
          {"columns", read_options_json(source.read, declared)},
          {"splits", splits_json(options)},
          {"saved_spec", saved ? to_json(*saved) : json(nullptr)}};
  // Only when cut: the stores of whole sources keep the fingerprints they had.
  if (source.is_cut()) fp["bars_between"] = {source.from_ns, source.through_ns};
  if (!source.series_from_ns.empty()) fp["series_from"] = source.series_from_ns;
  return fp;
}

// FNV-1a: names the file only; the whole fingerprint inside the store is what is compared.
std::string fingerprint_name(const json& fp) { return fnv1a64_hex(fp.dump()); }

// ---- reading a store ----

}  // namespace

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

namespace {

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

Dataset dataset_over(std::shared_ptr<MappedStore> store, const std::string& path, const DatasetOptions& options) {
  const json& index = store->index;
  if (index.value("format", "") != "qtft-feature-store") corrupt(path, "another format");
  if (index.value("version", 0) != kFormatVersion) {
    throw Error(path + ": a feature store of format " + index.value("version", json(0)).dump() + ", this qtft reads " +
                std::to_string(kFormatVersion) +
                "; prepare it again (qtft prepare, or any command that reads the data)");
  }
  options.validate();
  if (index.value("splits", json()) != splits_json(options)) {
    throw Error(path + ": the feature store was built for the splits " + index.value("splits", json()).dump() +
                ", not " + splits_json(options).dump() +
                "; give the store's --validation-fraction and --test-fraction, or prepare another");
  }
  InputSchema spec;
  std::vector<SeriesView> views;
  ReadNotes notes;
  try {
    spec = input_schema_from_json(index.at("spec"));
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
  if (old.value("version", 0) != kFormatVersion) {
    return shown + " is of store format " + std::to_string(old.value("version", 0)) + ", this qtft's is " +
           std::to_string(kFormatVersion);
  }
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
  return shown + " was built with other options (columns, splits or a model's features)";
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

BarSource with_model_inputs(BarSource source, const InputSchema& spec) {
  source.read.inputs = spec.declared;
  return source;
}

namespace {
// Both entry points' work: find the store, or build it in parts of `part_rows` rows.
StorePreparation prepare(const BarSource& given, const DatasetOptions& options, const InputSchema* saved,
                         StoreAccess access, uint64_t part_rows);
}  // namespace

StorePreparation prepare_feature_store(const BarSource& given, const DatasetOptions& options, const InputSchema* saved,
                                       StoreAccess access) {
  return prepare(given, options, saved, access, 0);
}

StorePreparation detail::prepare_feature_store_in_parts(const BarSource& source, const DatasetOptions& options,
                                                        const InputSchema* saved, uint64_t part_rows) {
  return prepare(source, options, saved, StoreAccess::BuildIfNeeded, part_rows);
}

namespace {

// What finding and building a store start from: the source as the store reads it, its
// folder, its files and its declared columns.
struct StoreQuery {
  BarSource source;
  fs::path folder;
  json files;
  InputDeclaration declared;
};

StoreQuery query_of(const BarSource& given, const DatasetOptions& options, const InputSchema* saved) {
  options.validate();
  StoreQuery q;
  q.source = saved ? with_model_inputs(given, *saved) : given;
  q.folder = store_folder_of(q.source);
  q.files = source_files(q.source);
  q.declared = declared_columns(q.source);
  return q;
}

std::optional<StorePreparation> existing_store(const StoreQuery& q, const DatasetOptions& options,
                                               const InputSchema* saved) {
  if (saved) {
    // A model trained from this source carries the fitted store's own statistics: that
    // store serves it as is, rather than a second store of the same numbers.
    json fitted_spec;
    if (auto fitted = find_store(q.folder, fingerprint(q.source, q.files, q.declared, options, nullptr), &fitted_spec);
        fitted && fitted_spec == to_json(*saved)) {
      return with_note(*fitted, q.source);
    }
  }
  if (auto found = find_store(q.folder, fingerprint(q.source, q.files, q.declared, options, saved))) {
    return with_note(*found, q.source);
  }
  return std::nullopt;
}

StorePreparation prepare(const BarSource& given, const DatasetOptions& options, const InputSchema* saved,
                         StoreAccess access, uint64_t part_rows) {
  const StoreQuery q = query_of(given, options, saved);
  if (auto found = existing_store(q, options, saved)) return *found;
  const json fp = fingerprint(q.source, q.files, q.declared, options, saved);
  const fs::path path = q.folder / (fingerprint_name(fp) + kExtension);
  if (access == StoreAccess::MustExist) {
    throw Error(path.string() + ": the feature store is missing: the rank that builds it did not");
  }
  std::error_code ec;
  fs::create_directories(q.folder, ec);
  if (ec) throw Error(q.folder.string() + ": cannot create the feature store folder: " + ec.message());
  std::string reason = why_rebuilt(q.folder, fp);
  auto out = build_store(q.source, options, saved, fp, path, part_rows);
  out.reason = "built: " + reason;
  return with_note(std::move(out), q.source);
}

}  // namespace

std::optional<StorePreparation> find_feature_store(const BarSource& source, const DatasetOptions& options,
                                                   const InputSchema* saved) {
  return existing_store(query_of(source, options, saved), options, saved);
}

Dataset map_feature_store(const std::string& path, const DatasetOptions& windows) {
  return dataset_over(open_store(path), path, windows);
}

Dataset open_dataset(const BarSource& source, const DatasetOptions& options, const InputSchema* saved,
                     StoreAccess access, const std::function<void(const StorePreparation&)>& prepared) {
  if (source.feature_store_folder().empty()) {
    const BarSet bars = load_bars(saved ? with_model_inputs(source, *saved) : source);
    return saved ? Dataset::build(bars, options, *saved) : Dataset::build(bars, options);
  }
  const auto store = prepare_feature_store(source, options, saved, access);
  if (prepared) prepared(store);
  return map_feature_store(store.path, options);
}

}  // namespace qtft::data
