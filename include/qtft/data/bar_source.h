#pragma once

#include <string>

#include "qtft/data/bars.h"
#include "qtft/data/synthetic.h"

namespace qtft::data {

// Where bars come from: a Parquet file, a CSV file, or (neither given) the embedded
// synthetic data set. One struct so that the CLI and embedding programs load alike.
struct BarSource {
  std::string parquet_file;
  std::string csv_file;
  BarReadOptions read;
  SyntheticOptions synthetic;
  bool uses_embedded_data() const { return parquet_file.empty() && csv_file.empty(); }
};

BarSet load_bars(const BarSource& source);

// One line naming the source, e.g. "embedded synthetic data (40000 bars, 2 symbols, seed 7)".
std::string describe_source(const BarSource& source);

}  // namespace qtft::data
