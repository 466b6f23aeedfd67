#include "qtft/train/detail/update.h"

#include <algorithm>
#include <deque>
#include <unordered_map>

#include "qtft/common/error.h"
#include "qtft/common/format.h"

namespace qtft::train {
namespace {

std::string no_bar_at_mark(const std::string& where, int64_t mark_ns, int64_t first_ns, int64_t last_ns, bool empty) {
  const std::string range =
      empty ? "it has no bars" : "its bars run from " + format_utc(first_ns) + " to " + format_utc(last_ns);
  return where + " has no bar at " + format_utc(mark_ns) + ", the last bar the model trained on (" + range +
         "): --update needs bars that continue the ones the model saw";
}

std::string other_close(const std::string& where, const artifact::SeriesMark& mark, double close) {
  return where + " at " + format_utc(mark.bar_ns) + ": the model trained on close " + format_number(mark.close) +
         ", this file has " + format_number(close) + ": the bars overlap inconsistently with those the model saw";
}

std::string nothing_after(const std::string& source) {
  return source + ": no bar comes after the last ones the model trained on; --update has nothing to learn";
}

const artifact::SeriesMark* named_mark(const std::string& symbol, const std::vector<artifact::SeriesMark>& marks) {
  for (const auto& m : marks) {
    if (m.symbol == symbol) return &m;
  }
  return nullptr;
}

std::string unknown_symbol(const std::string& source, const std::string& symbol,
                           const std::vector<artifact::SeriesMark>& marks) {
  std::string known;
  for (const auto& m : marks) known += (known.empty() ? "" : ", ") + m.symbol;
  return source + ": symbol '" + symbol + "' is not one the model has trained on (it knows " + known +
         "); --update continues the model's own series";
}

const artifact::SeriesMark& mark_for(const data::BarSeries& series, size_t series_count,
                                     const std::vector<artifact::SeriesMark>& marks, const std::string& source) {
  if (const auto* named = named_mark(series.symbol, marks)) return *named;
  if (series_count == 1 && marks.size() == 1) return marks.front();
  throw Error(unknown_symbol(source, series.symbol, marks));
}

}  // namespace

UpdateBars bars_after(const data::BarSet& bars, const std::vector<artifact::SeriesMark>& trained_through,
                      int64_t context_bars) {
  UpdateBars out;
  out.bars.source = bars.source;
  out.bars.fields = bars.fields;
  out.bars.declared = bars.declared;
  for (const auto& series : bars.series) {
    const auto& mark = mark_for(series, bars.series.size(), trained_through, bars.source);
    const auto& ts = series.timestamp_ns;
    const auto at = std::lower_bound(ts.begin(), ts.end(), mark.bar_ns);
    const std::string where = bars.source + ": symbol '" + series.symbol + "'";
    if (at == ts.end() || *at != mark.bar_ns) {
      throw Error(
          no_bar_at_mark(where, mark.bar_ns, ts.empty() ? 0 : ts.front(), ts.empty() ? 0 : ts.back(), ts.empty()));
    }
    const auto last_seen = static_cast<size_t>(at - ts.begin());
    if (series.close[last_seen] != mark.close) throw Error(other_close(where, mark, series.close[last_seen]));
    if (last_seen + 1 == series.size()) continue;  // nothing new for this series
    const size_t first =
        last_seen + 1 > static_cast<size_t>(context_bars) ? last_seen + 1 - static_cast<size_t>(context_bars) : 0;
    out.bars.series.push_back(data::slice_bars(series, first, series.size()));
    out.bars.series.back().symbol = mark.symbol;
    out.added.push_back({mark.symbol, ts[last_seen + 1], ts.back()});
  }
  if (out.bars.series.empty()) {
    throw Error(nothing_after(bars.source));
  }
  return out;
}

namespace {

// One series as find_bars_after reads it.
struct SeriesScan {
  std::string symbol;
  const artifact::SeriesMark* mark = nullptr;  // by name, or the sole mark of a one-series model
  int64_t first_ns = 0, last_ns = 0;
  std::deque<int64_t> history;  // the times of its last `context_bars` bars at or before the mark
  std::optional<double> close_at_mark;
  std::optional<int64_t> first_new_ns;
  int64_t new_bars = 0;
};

}  // namespace

std::optional<UpdateStarts> find_bars_after(const data::BarSource& source,
                                            const std::vector<artifact::SeriesMark>& trained_through,
                                            int64_t context_bars) {
  const std::string shown = source.parquet_file.empty() ? source.csv_file : source.parquet_file;
  std::vector<SeriesScan> scans;  // in order of first appearance, as load_bars numbers series
  std::unordered_map<std::string, size_t> index;
  data::for_each_bar_part(source, [&](const data::BarSet& part) {
    for (const auto& series : part.series) {
      const auto& ts = series.timestamp_ns;
      if (ts.empty()) continue;
      auto [it, added] = index.try_emplace(series.symbol, scans.size());
      if (added) {
        auto& scan = scans.emplace_back();
        scan.symbol = series.symbol;
        scan.mark = named_mark(series.symbol, trained_through);
        if (!scan.mark && trained_through.size() == 1) scan.mark = &trained_through.front();
        scan.first_ns = ts.front();
      }
      auto& scan = scans[it->second];
      scan.last_ns = ts.back();
      if (!scan.mark) continue;  // unknown: an error once every series is seen (bars_after's order)
      const int64_t mark_ns = scan.mark->bar_ns;
      const auto after = static_cast<size_t>(std::upper_bound(ts.begin(), ts.end(), mark_ns) - ts.begin());
      for (size_t i = after > static_cast<size_t>(context_bars) ? after - static_cast<size_t>(context_bars) : 0;
           i < after; ++i) {
        scan.history.push_back(ts[i]);
        if (static_cast<int64_t>(scan.history.size()) > context_bars) scan.history.pop_front();
      }
      if (after > 0 && ts[after - 1] == mark_ns) scan.close_at_mark = series.close[after - 1];
      if (after < ts.size() && !scan.first_new_ns) scan.first_new_ns = ts[after];
      scan.new_bars += static_cast<int64_t>(ts.size() - after);
    }
  });
  UpdateStarts starts;
  bool renamed = false;
  for (const auto& scan : scans) {
    const std::string where = shown + ": symbol '" + scan.symbol + "'";
    if (!scan.mark || (scan.mark->symbol != scan.symbol && scans.size() != 1)) {
      throw Error(unknown_symbol(shown, scan.symbol, trained_through));
    }
    const auto& mark = *scan.mark;
    if (!scan.close_at_mark) throw Error(no_bar_at_mark(where, mark.bar_ns, scan.first_ns, scan.last_ns, false));
    if (*scan.close_at_mark != mark.close) throw Error(other_close(where, mark, *scan.close_at_mark));
    if (!scan.first_new_ns) continue;  // nothing new for this series
    renamed = renamed || mark.symbol != scan.symbol;
    starts.from_ns.emplace_back(scan.symbol, scan.history.front());
    starts.added.push_back({mark.symbol, *scan.first_new_ns, scan.last_ns});
    starts.new_bars.push_back(scan.new_bars);
  }
  if (starts.from_ns.empty()) throw Error(nothing_after(shown));
  if (renamed) return std::nullopt;
  return starts;
}

}  // namespace qtft::train
