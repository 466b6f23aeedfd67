#pragma once

// What the training benchmarks share: the configurations they measure and the data.
#include <cstdint>

#include "qtft/data/bar_source.h"
#include "qtft/data/dataset.h"
#include "qtft/data/synthetic.h"

namespace qtft::bench {

struct TftConfig {
  const char* name;
  int64_t encoder, horizon, hidden, heads, batch;
};

// The TFT paper's electricity configuration, and a small one for quick runs.
inline constexpr TftConfig kPaperConfig{"paper", 168, 24, 160, 4, 64};
inline constexpr TftConfig kSmallConfig{"small", 64, 8, 64, 4, 64};

// The bars of `source` (the embedded synthetic bars by default), windowed for `config`.
inline data::Dataset dataset_for(const TftConfig& config, const data::BarSource& source = {}) {
  const auto bars = data::load_bars(source);
  data::DatasetOptions options;
  options.encoder_length = config.encoder;
  options.horizon = config.horizon;
  return data::Dataset::build(bars, options);
}

}  // namespace qtft::bench
