#include "qtft/data/bar_source.h"

#include <filesystem>

#include "qtft/common/error.h"
#include "qtft/data/parquet_dataset.h"

namespace qtft::data {

BarSet load_bars(const BarSource& source) {
  if (!source.parquet_file.empty() && !source.csv_file.empty()) {
    throw UsageError("give --parquet-file or --csv-file, not both");
  }
  if (source.is_dataset_folder()) return read_bars_parquet_dataset(source.parquet_file, source.read);
  if (!source.parquet_file.empty()) return read_bars_parquet(source.parquet_file, source.read);
  if (!source.csv_file.empty()) return read_bars_csv(source.csv_file, source.read);
  return generate_synthetic_bars(source.synthetic);
}

namespace {

void keep_last(BarSeries& s, size_t keep) {
  if (s.size() > keep) s = slice_bars(s, s.size() - keep, s.size());
}

}  // namespace

BarSet load_latest_bars(const BarSource& source, size_t keep) {
  if (!source.is_dataset_folder()) {
    BarSet bars = load_bars(source);
    for (auto& s : bars.series) keep_last(s, keep);
    return bars;
  }
  DatasetReader reader(source.parquet_file, source.read);
  BarSet bars;
  bars.source = source.parquet_file;
  SeriesAssembly assembly;
  for (size_t k = 0; k < reader.files().size(); ++k) {
    BarSet part = reader.read(k);
    if (k == 0) {
      bars.has_range = part.has_range;
      bars.has_volume = part.has_volume;
    }
    const auto where = assembly.place(part);
    for (size_t j = 0; j < part.series.size(); ++j) {
      keep_last(part.series[j], keep);
      if (where[j] == bars.series.size()) bars.series.emplace_back().symbol = part.series[j].symbol;
      // The part's bars come after the kept ones; together at most 2 x keep.
      auto& to = bars.series[where[j]];
      append_bars(to, part.series[j]);
      keep_last(to, keep);
    }
  }
  return bars;
}

bool BarSource::is_dataset_folder() const { return !parquet_file.empty() && is_directory(parquet_file); }

std::string BarSource::feature_store_folder() const {
  if (in_memory || uses_embedded_data()) return "";
  if (!feature_store.empty()) return feature_store;
  return is_dataset_folder() ? (std::filesystem::path(parquet_file) / "_qtft_store").string() : "";
}

std::string describe_source(const BarSource& source) {
  if (!source.parquet_file.empty()) return source.parquet_file;
  if (!source.csv_file.empty()) return source.csv_file;
  return "embedded synthetic data (" + std::to_string(source.synthetic.rows) + " bars, " +
         std::to_string(source.synthetic.symbols) + " symbols, seed " +
         std::to_string(source.synthetic.seed) + ")";
}

}  // namespace qtft::data
