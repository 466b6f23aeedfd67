// Building a feature store in three streaming passes (feature_store.cpp says why): the
// spill of every file's bars, the fit, and the featurized series appended to the store.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>

#include "qtft/common/error.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/features/detail/features.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/store/detail/store_format.h"
#include "qtft/io/atomic_file.h"

namespace qtft::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Pass 1's spill: each file's series, column by column, and where each chunk lies.
struct SpilledChunk {
  static constexpr uint64_t kAbsent = ~uint64_t{0};
  size_t series = 0;
  uint64_t rows = 0;
  std::vector<uint64_t> bars;      // in for_each_bar_column's order; kAbsent for a column the bars lack
  std::vector<uint64_t> declared;  // observed columns, then known, then static
};

struct Spill {
  BarFields fields;
  BarSpacing spacing;  // every gap of every series, across parts too
  InputDeclaration declared;
  std::vector<std::string> unused_columns;
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
      spill.unused_columns = part.unused_columns;
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
      for_each_bar_column([&](auto column) {
        auto& offset = c.bars.emplace_back(SpilledChunk::kAbsent);
        if (!(s.*column).empty()) append_column(out, s.*column, offset);
      });
      for_each_declared_kind(s, [&](const auto& columns) {
        for (const auto& column : columns) append_column(out, column, c.declared.emplace_back());
      });
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
  for_each_bar_column([&](auto column) {
    (s.*column).clear();
    (s.*column).reserve(rows);
  });
  s.declared_observed.resize(spill.declared.observed_columns().size());
  s.declared_known.resize(spill.declared.known_columns().size());
  s.declared_static.resize(spill.declared.static_columns().size());
  s.observed_levels = spill.levels[series].observed;
  s.known_levels = spill.levels[series].known;
  s.static_levels = spill.levels[series].statics;
  for_each_declared_kind(s, [&](auto& columns) {
    for (auto& column : columns) {
      column.clear();
      column.reserve(rows);
    }
  });
  uint64_t at = 0;  // the series' bar where chunk c starts
  for (const auto& c : spill.chunks) {
    if (c.series != series) continue;
    const uint64_t from = std::max(begin, at), to = std::min(end, at + c.rows);
    if (from < to) {
      const uint64_t skip = from - at, n = to - from;
      size_t k = 0;
      for_each_bar_column([&](auto column) {
        const uint64_t offset = c.bars[k++];
        if (offset != SpilledChunk::kAbsent) file.append(s.*column, offset, skip, n);
      });
      k = 0;
      for_each_declared_kind(s, [&](auto& columns) {
        for (auto& column : columns) file.append(column, c.declared[k++], skip, n);
      });
    }
    at += c.rows;
    if (at >= end) break;
  }
  return s;
}

// Rows featurized at once when none are asked for: a part's bars and raw features in double
// and its features in float come to about this many bytes, whatever the series' length.
constexpr uint64_t kPartBytes = 64ull << 20;

uint64_t default_part_rows(const InputDeclaration& declared) {
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

}  // namespace

StorePreparation build_store(const BarSource& source, const DatasetOptions& options, const InputSchema* saved,
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
    InputSchema schema;
    if (saved) {
      check_bars_fit(spill.fields, spill.declared, *saved, spill.source);
      schema = *saved;
    } else {
      SchemaFitter fitter(plan_inputs(spill.fields, spill.spacing, spill.declared, spill.source), options);
      for (size_t i = 0; i < spill.symbols.size(); ++i) {
        for_each_part(spill, spilled, i, series_bars[i], part_rows, bars,
                      [&](const BarSeries& part, uint64_t first_row) { fitter.add_part(part, first_row, rows_of(i)); });
      }
      schema = fitter.finish();
    }

    ArrayWriter out_file(store_file.temp_path(), shown);
    out_file.write(kHeadMagic, sizeof kHeadMagic);
    json series = json::array();
    const uint64_t observed_width = schema.observed.size(), known_width = schema.known.size();
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
        dataset_series(part, i, spill.symbols.size(), schema, options, spill.source, raw, f);
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
    json index{{"format", "qtft-feature-store"}, {"version", kFormatVersion}, {"fingerprint", fp},
               {"splits", splits_json(options)}, {"spec", to_json(schema)},   {"bars", out.bars},
               {"data_bytes", data_bytes},       {"series", series}};
    if (!spill.unused_columns.empty()) index["unused_columns"] = spill.unused_columns;
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

}  // namespace qtft::data
