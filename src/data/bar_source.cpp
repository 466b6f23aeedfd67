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

BarSet load_latest_bars(const BarSource& source, size_t keep) {
  if (source.is_dataset_folder()) return read_bars_parquet_dataset(source.parquet_file, source.read, keep);
  BarSet bars = load_bars(source);
  for (auto& s : bars.series) keep_last_bars(s, keep);
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
         std::to_string(source.synthetic.symbols) + " symbols, seed " + std::to_string(source.synthetic.seed) + ")";
}

}  // namespace qtft::data
