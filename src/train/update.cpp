#include "qtft/train/detail/update.h"

#include <algorithm>

#include "qtft/common/error.h"
#include "qtft/common/format.h"

namespace qtft::train {
namespace {

const artifact::SeriesMark& mark_for(const data::BarSeries& series, size_t series_count,
                                     const std::vector<artifact::SeriesMark>& marks, const std::string& source) {
  for (const auto& m : marks) {
    if (m.symbol == series.symbol) return m;
  }
  if (series_count == 1 && marks.size() == 1) return marks.front();
  std::string known;
  for (const auto& m : marks) known += (known.empty() ? "" : ", ") + m.symbol;
  throw Error(source + ": symbol '" + series.symbol + "' is not one the model has trained on (it knows " + known +
              "); --update continues the model's own series");
}

}  // namespace

UpdateBars bars_after(const data::BarSet& bars, const std::vector<artifact::SeriesMark>& trained_through,
                      int64_t context_bars) {
  UpdateBars out;
  out.bars.source = bars.source;
  out.bars.has_range = bars.has_range;
  out.bars.has_volume = bars.has_volume;
  out.bars.declared = bars.declared;
  for (const auto& series : bars.series) {
    const auto& mark = mark_for(series, bars.series.size(), trained_through, bars.source);
    const auto& ts = series.timestamp_ns;
    const auto at = std::lower_bound(ts.begin(), ts.end(), mark.bar_ns);
    const std::string where = bars.source + ": symbol '" + series.symbol + "'";
    if (at == ts.end() || *at != mark.bar_ns) {
      const std::string range = ts.empty()
                                    ? "it has no bars"
                                    : "its bars run from " + format_utc(ts.front()) + " to " + format_utc(ts.back());
      throw Error(where + " has no bar at " + format_utc(mark.bar_ns) + ", the last bar the model trained on (" +
                  range + "): --update needs bars that continue the ones the model saw");
    }
    const auto last_seen = static_cast<size_t>(at - ts.begin());
    if (series.close[last_seen] != mark.close) {
      throw Error(where + " at " + format_utc(mark.bar_ns) + ": the model trained on close " +
                  format_number(mark.close) + ", this file has " + format_number(series.close[last_seen]) +
                  ": the bars overlap inconsistently with those the model saw");
    }
    if (last_seen + 1 == series.size()) continue;  // nothing new for this series
    const size_t first =
        last_seen + 1 > static_cast<size_t>(context_bars) ? last_seen + 1 - static_cast<size_t>(context_bars) : 0;
    out.bars.series.push_back(data::slice_bars(series, first, series.size()));
    out.bars.series.back().symbol = mark.symbol;
    out.added.push_back({mark.symbol, ts[last_seen + 1], ts.back()});
  }
  if (out.bars.series.empty()) {
    throw Error(bars.source + ": no bar comes after the last ones the model trained on; --update has nothing to learn");
  }
  return out;
}

}  // namespace qtft::train
