#pragma once

// `qtft train --update`: a deployed model learns from the bars that came after the ones it
// trained on, and nothing else.

#include <cstdint>
#include <vector>

#include "qtft/artifact/model_file.h"
#include "qtft/data/bars.h"

namespace qtft::train {

struct UpdateBars {
  // Per series with new bars: `context_bars` bars up to and including the model's last
  // trained bar (the encoder's history, never a target), then every bar after it.
  data::BarSet bars;
  // Per series kept: its first new bar, and its last bar (the split decides which train).
  std::vector<artifact::BarsAdded> added;
};

// Selects the update's bars. Throws qtft::Error naming the source, symbol and bar when a
// series is one the model has not trained on, lacks the model's last bar, or has another
// close there (the bars overlap inconsistently), and when no series has a new bar. The
// sole series of a file continues a one-series model whatever its name (as forecasts do).
UpdateBars bars_after(const data::BarSet& bars, const std::vector<artifact::SeriesMark>& trained_through,
                      int64_t context_bars);

}  // namespace qtft::train
