#include "qtft/data/bar_source.h"

#include "qtft/common/error.h"

namespace qtft::data {

BarSet load_bars(const BarSource& source) {
  if (!source.parquet_file.empty() && !source.csv_file.empty()) {
    throw UsageError("give --parquet-file or --csv-file, not both");
  }
  if (!source.parquet_file.empty()) return read_bars_parquet(source.parquet_file, source.read);
  if (!source.csv_file.empty()) return read_bars_csv(source.csv_file, source.read);
  return generate_synthetic_bars(source.synthetic);
}

std::string describe_source(const BarSource& source) {
  if (!source.parquet_file.empty()) return source.parquet_file;
  if (!source.csv_file.empty()) return source.csv_file;
  return "embedded synthetic data (" + std::to_string(source.synthetic.rows) + " bars, " +
         std::to_string(source.synthetic.symbols) + " symbols, seed " +
         std::to_string(source.synthetic.seed) + ")";
}

}  // namespace qtft::data
