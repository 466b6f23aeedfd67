#pragma once

// `qtft train --update`: a deployed model learns from the bars that came after the ones it
// trained on, and nothing else.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qtft/artifact/model_file.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/bars.h"

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

// The same selection found by reading `source` a part at a time (a folder's files, a file's
// batches), holding none of its bars, so that a feature store of those bars alone can be
// prepared (data::BarSource::series_from_ns): per series kept, the time of its first bar.
struct UpdateStarts {
  std::vector<std::pair<std::string, int64_t>> from_ns;
  std::vector<artifact::BarsAdded> added;
  std::vector<int64_t> new_bars;  // per series kept, its bars after the model's last
};
// The same errors as bars_after. nullopt when the source's sole series continues a
// one-series model under another name: bars_after renames it, a store keeps the source's.
std::optional<UpdateStarts> find_bars_after(const data::BarSource& source,
                                            const std::vector<artifact::SeriesMark>& trained_through,
                                            int64_t context_bars);

}  // namespace qtft::train
