#include "qtft/data/bars/bar_source.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "qtft/common/detail/fingerprint.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/parquet_dataset.h"

namespace qtft::data {

namespace {

BarSet read_whole_source(const BarSource& source) {
  if (source.is_dataset_folder()) {
    if (!source.is_cut()) return read_bars_parquet_dataset(source.parquet_file, source.read);
    // Cut file by file, the files outside the cut not read.
    JoinedBars bars(source.parquet_file);
    for_each_bar_part(source, [&](const BarSet& part) { bars.add(part); });
    return bars.take();
  }
  if (!source.parquet_file.empty()) return read_bars_parquet(source.parquet_file, source.read);
  if (!source.csv_file.empty()) return read_bars_csv(source.csv_file, source.read);
  if (!source.read.inputs.empty()) {
    throw UsageError(
        "--observed, --known and --target-column name columns of a file, and the embedded data has bars only: write "
        "it with its extra columns (qtft make-data --extra-inputs K --output F.parquet) and train on F");
  }
  BarSet bars = generate_synthetic_bars(source.synthetic);
  // The embedded bars' extra columns (make-data --extra-inputs) stay as generated.
  const auto declared = without_columns(source.read.inputs, describe_source(source));
  bars.declared.calendar_timezone = declared.calendar_timezone;
  bars.declared.calendar = declared.calendar;
  bars.declared.target = declared.target;  // a transform of the close
  return bars;
}

}  // namespace

BarSet load_bars(const BarSource& source) {
  if (!source.parquet_file.empty() && !source.csv_file.empty()) {
    throw UsageError("give --parquet-file or --csv-file, not both");
  }
  BarSet bars = read_whole_source(source);
  cut_bars(bars, source);
  return bars;
}

void cut_bars(BarSet& bars, const BarSource& source) {
  if (!source.is_cut()) return;
  keep_bars_between(bars, source.from_ns, source.through_ns);
  if (source.series_from_ns.empty()) return;
  for (auto& s : bars.series) {
    const auto listed = std::find_if(source.series_from_ns.begin(), source.series_from_ns.end(),
                                     [&](const auto& from) { return from.first == s.symbol; });
    if (listed == source.series_from_ns.end()) {
      s = slice_bars(s, 0, 0);
      continue;
    }
    const auto& ts = s.timestamp_ns;
    const auto begin = static_cast<size_t>(std::lower_bound(ts.begin(), ts.end(), listed->second) - ts.begin());
    if (begin > 0) s = slice_bars(s, begin, s.size());
  }
  std::erase_if(bars.series, [](const BarSeries& s) { return s.size() == 0; });
}

namespace {

// Whether file k of a folder may hold a bar inside the source's cut: a file its footer
// places wholly outside is not read (DatasetReader::may_hold_bars_between says when that
// is exact).
bool may_hold_cut_bars(const DatasetReader& reader, size_t k, const BarSource& source) {
  if (!source.is_cut()) return true;
  int64_t from = source.from_ns;
  if (!source.series_from_ns.empty()) {
    const auto& symbol = reader.files()[k].partition_symbol;
    int64_t earliest = std::numeric_limits<int64_t>::max();  // a symbol not listed: none of its bars
    for (const auto& [name, t] : source.series_from_ns) {
      if (!symbol || *symbol == name) earliest = std::min(earliest, t);
    }
    from = std::max(from, earliest);
  }
  return reader.may_hold_bars_between(k, from, source.through_ns);
}

}  // namespace

void for_each_bar_part(const BarSource& source, const std::function<void(const BarSet& part)>& use) {
  bool any = false;
  const auto take = [&](BarSet part) {
    cut_bars(part, source);
    use(part);
    any = true;
  };
  if (source.is_dataset_folder()) {
    DatasetReader reader(source.parquet_file, source.read);
    bool skipped = false;
    for (size_t k = 0; k < reader.files().size(); ++k) {
      if (may_hold_cut_bars(reader, k, source)) {
        reader.read_batches(k, take);
      } else {
        skipped = true;
      }
    }
    if (!any && !skipped) throw Error(source.parquet_file + ": the dataset's files hold no rows");
  } else if (!source.parquet_file.empty()) {
    // Each batch a part, as a folder's file is; the declared inputs carry across them.
    DeclaredCarry carry;
    read_parquet_batches(source.parquet_file, [&](std::shared_ptr<arrow::Table> batch, int64_t first_row) {
      take(bars_from_table(*batch, source.parquet_file, source.read, &carry, first_row));
    });
    if (!any) throw Error(source.parquet_file + ": the file holds no rows");
  } else {
    take(read_whole_source(source));
  }
}

SourceClock clock_of(const BarSet& bars) {
  SourceClock clock;
  merge_clock(clock, bars);
  return clock;
}

void merge_clock(SourceClock& clock, const BarSet& bars) {
  for (const auto& s : bars.series) {
    if (s.size() == 0) continue;
    clock.timeline.insert(clock.timeline.end(), s.timestamp_ns.begin(), s.timestamp_ns.end());
    const auto known = std::find_if(clock.first_bar.begin(), clock.first_bar.end(),
                                    [&](const auto& f) { return f.first == s.symbol; });
    if (known == clock.first_bar.end()) {
      clock.first_bar.emplace_back(s.symbol, s.timestamp_ns.front());
    } else {
      known->second = std::min(known->second, s.timestamp_ns.front());
    }
  }
  std::sort(clock.timeline.begin(), clock.timeline.end());
  clock.timeline.erase(std::unique(clock.timeline.begin(), clock.timeline.end()), clock.timeline.end());
}

SourceClock read_source_clock(const BarSource& source) {
  if (!source.is_dataset_folder()) return clock_of(load_bars(source));
  SourceClock clock;
  DatasetReader reader(source.parquet_file, source.read);
  for (size_t k = 0; k < reader.files().size(); ++k) {
    if (!may_hold_cut_bars(reader, k, source)) continue;
    BarSet part = reader.read(k);
    cut_bars(part, source);
    merge_clock(clock, part);
  }
  return clock;
}

BarSet load_latest_bars(const BarSource& source, size_t keep) {
  if (source.is_dataset_folder()) return read_bars_parquet_dataset(source.parquet_file, source.read, keep);
  if (!source.parquet_file.empty() && source.csv_file.empty() && !source.is_cut()) {
    return read_latest_bars_parquet(source.parquet_file, source.read, keep);
  }
  BarSet bars = load_bars(source);
  for (auto& s : bars.series) keep_last_bars(s, keep);
  return bars;
}

bool BarSource::is_dataset_folder() const { return !parquet_file.empty() && is_directory(parquet_file); }

namespace {

std::filesystem::path store_next_to(const std::string& folder) { return std::filesystem::path(folder) / "_qtft_store"; }

// A read-only data folder (a shared mount, another user's files) keeps its stores in the
// user's cache, one folder per data folder.
bool stores_in_user_cache(const std::string& folder) {
  std::error_code ec;
  return !std::filesystem::exists(store_next_to(folder), ec) && ::access(folder.c_str(), W_OK) != 0;
}

std::filesystem::path user_cache_store(const std::string& folder) {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  std::filesystem::path cache;
  if (xdg && *xdg) {
    cache = xdg;
  } else if (home && *home) {
    cache = std::filesystem::path(home) / ".cache";
  } else {
    throw Error(folder +
                ": cannot write a feature store next to the data, and neither XDG_CACHE_HOME nor HOME is set: "
                "give --feature-store DIR");
  }
  auto absolute = std::filesystem::absolute(folder).lexically_normal();
  if (absolute.filename().empty()) absolute = absolute.parent_path();  // "bars/" is "bars"
  return cache / "qtft" / "stores" / (absolute.filename().string() + "-" + fnv1a64_hex(absolute.string()));
}

}  // namespace

std::string BarSource::feature_store_folder() const {
  if (in_memory || uses_embedded_data()) return "";
  if (!feature_store.empty()) return feature_store;
  if (!is_dataset_folder()) return "";
  return (stores_in_user_cache(parquet_file) ? user_cache_store(parquet_file) : store_next_to(parquet_file)).string();
}

std::string BarSource::feature_store_note() const {
  if (in_memory || uses_embedded_data() || !feature_store.empty() || !is_dataset_folder()) return "";
  if (!stores_in_user_cache(parquet_file)) return "";
  return parquet_file + " is not writable, so its feature store is in the user's cache";
}

std::string describe_source(const BarSource& source) {
  if (!source.parquet_file.empty()) return source.parquet_file;
  if (!source.csv_file.empty()) return source.csv_file;
  return "embedded synthetic data (" + std::to_string(source.synthetic.rows) + " bars, " +
         std::to_string(source.synthetic.symbols) + " symbols, seed " + std::to_string(source.synthetic.seed) + ")";
}

}  // namespace qtft::data
