#include "qtft/data/bars/bars.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "qtft/common/error.h"
#include "qtft/common/format.h"

namespace qtft::data {

size_t BarSet::total_rows() const {
  size_t n = 0;
  for (const auto& s : series) n += s.size();
  return n;
}

void keep_last_bars(BarSeries& s, size_t keep) {
  if (s.size() > keep) s = slice_bars(s, s.size() - keep, s.size());
}

void keep_bars_between(BarSet& bars, int64_t from_ns, int64_t through_ns) {
  for (auto& s : bars.series) {
    const auto& ts = s.timestamp_ns;
    const auto begin = static_cast<size_t>(std::lower_bound(ts.begin(), ts.end(), from_ns) - ts.begin());
    const auto end = static_cast<size_t>(std::upper_bound(ts.begin(), ts.end(), through_ns) - ts.begin());
    if (begin > 0 || end < s.size()) s = slice_bars(s, begin, std::max(begin, end));
  }
  std::erase_if(bars.series, [](const BarSeries& s) { return s.size() == 0; });
}

namespace {

// For each of `from`'s levels its index in `to`'s, which gains the levels it lacks.
std::vector<double> merged_levels(std::vector<std::string>& to, const std::vector<std::string>& from) {
  std::vector<double> index(from.size());
  for (size_t k = 0; k < from.size(); ++k) {
    auto it = std::find(to.begin(), to.end(), from[k]);
    if (it == to.end()) it = to.insert(to.end(), from[k]);
    index[k] = static_cast<double>(it - to.begin());
  }
  return index;
}

// Appends `from`'s columns of one kind to `to`'s, categorical cells recoded into `to`'s levels.
void append_kind(std::vector<std::vector<double>>& to, std::vector<std::vector<std::string>>& to_levels,
                 const std::vector<std::vector<double>>& from, const std::vector<std::vector<std::string>>& from_levels,
                 std::vector<std::vector<double>>* to_future = nullptr,
                 const std::vector<std::vector<double>>* from_future = nullptr) {
  if (to.empty()) to.resize(from.size());
  if (to_levels.size() < from_levels.size()) to_levels.resize(from_levels.size());
  if (to_future && to_future->empty()) to_future->resize(from_future->size());
  for (size_t c = 0; c < from.size(); ++c) {
    const bool categorical = c < from_levels.size() && !from_levels[c].empty();
    const std::vector<double> index = categorical ? merged_levels(to_levels[c], from_levels[c]) : std::vector<double>{};
    auto append = [&](std::vector<double>& a, const std::vector<double>& b) {
      for (double v : b) a.push_back(categorical ? index.at(static_cast<size_t>(v)) : v);
    };
    append(to[c], from[c]);
    if (to_future && c < from_future->size()) append((*to_future)[c], (*from_future)[c]);
  }
}

}  // namespace

void append_bars(BarSeries& to, const BarSeries& from) {
  auto append = [](auto& a, const auto& b) { a.insert(a.end(), b.begin(), b.end()); };
  for_each_bar_column([&](auto column) { append(to.*column, from.*column); });
  if (!to.future_timestamp_ns.empty() && from.size() > 0) {
    throw Error("symbol '" + to.symbol + "': the bar at " + format_utc(from.timestamp_ns.front()) +
                " follows its future rows (an empty close at " + format_utc(to.future_timestamp_ns.front()) +
                "); future rows come after the last bar");
  }
  append_kind(to.declared_observed, to.observed_levels, from.declared_observed, from.observed_levels);
  append_kind(to.declared_known, to.known_levels, from.declared_known, from.known_levels, &to.future_known,
              &from.future_known);
  append_kind(to.declared_static, to.static_levels, from.declared_static, from.static_levels);
  append(to.future_timestamp_ns, from.future_timestamp_ns);
}

BarSeries slice_bars(const BarSeries& s, size_t begin, size_t end) {
  if (begin > end || end > s.size()) {
    throw Error("slice_bars: bars [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " +
                std::to_string(s.size()));
  }
  auto slice = [&](const auto& v) {
    using V = std::decay_t<decltype(v)>;
    if (v.empty()) return V{};
    return V(v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(end));
  };
  BarSeries out;
  out.symbol = s.symbol;
  for_each_bar_column([&](auto column) { out.*column = slice(s.*column); });
  out.declared_observed.reserve(s.declared_observed.size());
  for (const auto& column : s.declared_observed) out.declared_observed.push_back(slice(column));
  out.declared_known.reserve(s.declared_known.size());
  for (const auto& column : s.declared_known) out.declared_known.push_back(slice(column));
  out.declared_static.reserve(s.declared_static.size());
  for (const auto& column : s.declared_static) out.declared_static.push_back(slice(column));
  out.observed_levels = s.observed_levels;
  out.known_levels = s.known_levels;
  out.static_levels = s.static_levels;
  if (end == s.size()) {
    out.future_timestamp_ns = s.future_timestamp_ns;
    out.future_known = s.future_known;
  }
  return out;
}

namespace {

// The rows ahead: after the last bar, increasing, each with every declared known value.
void validate_future_rows(const BarSeries& s, const std::string& where) {
  const size_t n = s.future_timestamp_ns.size();
  if (n == 0 && s.future_known.empty()) return;
  if (s.future_known.size() != s.declared_known.size()) {
    throw Error(where + ": its future rows carry " + std::to_string(s.future_known.size()) +
                " declared known columns, its bars " + std::to_string(s.declared_known.size()));
  }
  for (const auto& column : s.future_known) {
    if (column.size() != n) {
      throw Error(where + ": a declared known input has " + std::to_string(column.size()) + " future values but " +
                  std::to_string(n) + " future timestamps");
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const int64_t previous = i > 0 ? s.future_timestamp_ns[i - 1] : (s.size() > 0 ? s.timestamp_ns.back() : INT64_MIN);
    const std::string row =
        where + ": future row " + std::to_string(i + 1) + " (" + format_utc(s.future_timestamp_ns[i]) + "): ";
    if (s.future_timestamp_ns[i] <= previous) {
      throw Error(row + "not after " + format_utc(previous) + (i > 0 ? ", the future row before" : ", the last bar"));
    }
    for (size_t c = 0; c < s.future_known.size(); ++c) {
      const double v = s.future_known[c][i];
      if (!std::isfinite(v))
        throw Error(row + "declared known input " + std::to_string(c + 1) + " " + format_number(v) + " is not finite");
    }
  }
}

}  // namespace

void validate_series(const BarSeries& s, const std::string& source) {
  const std::string where = source + ": symbol '" + s.symbol + "'";
  const size_t n = s.close.size();
  auto check_length = [&](size_t size, const char* field, bool optional) {
    if (optional && size == 0) return;
    if (size != n) {
      throw Error(where + ": " + field + " has " + std::to_string(size) + " values but close has " + std::to_string(n));
    }
  };
  check_length(s.timestamp_ns.size(), "timestamp", false);
  for (const auto& column : kPriceColumns) check_length((s.*column.values).size(), column.name, column.optional);
  for (const auto& column : s.declared_observed) check_length(column.size(), "a declared observed input", false);
  for (const auto& column : s.declared_known) check_length(column.size(), "a declared known input", false);
  for (const auto& column : s.declared_static) check_length(column.size(), "a declared static input", false);
  if (s.open.empty() != s.high.empty() || s.open.empty() != s.low.empty()) {
    throw Error(where + ": has only some of open, high and low; give all three or none (close-only bars)");
  }
  auto fail = [&](size_t i, const std::string& what) {
    throw Error(where + ": bar " + std::to_string(i + 1) + " (" + format_utc(s.timestamp_ns[i]) + "): " + what);
  };
  auto check_price = [&](size_t i, const char* field, double v) {
    if (!std::isfinite(v)) fail(i, std::string(field) + " " + format_number(v) + " is not finite");
    if (v <= 0) fail(i, std::string(field) + " " + format_number(v) + " is not positive");
    if (v < 1e-300) fail(i, std::string(field) + " " + format_number(v) + " is too small to be a price (below 1e-300)");
  };
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && s.timestamp_ns[i] <= s.timestamp_ns[i - 1]) {
      fail(i, std::string(s.timestamp_ns[i] == s.timestamp_ns[i - 1] ? "duplicate" : "unsorted") +
                  " timestamp: the previous bar has " + format_utc(s.timestamp_ns[i - 1]));
    }
    check_price(i, "close", s.close[i]);
    if (!s.open.empty()) {
      check_price(i, "open", s.open[i]);
      check_price(i, "high", s.high[i]);
      check_price(i, "low", s.low[i]);
      if (s.high[i] < s.low[i])
        fail(i, "high " + format_number(s.high[i]) + " is below low " + format_number(s.low[i]));
    }
    if (!s.volume.empty()) {
      if (!std::isfinite(s.volume[i])) fail(i, "volume " + format_number(s.volume[i]) + " is not finite");
      if (s.volume[i] < 0) fail(i, "volume " + format_number(s.volume[i]) + " is negative");
    }
    if (!s.target_values.empty() && !std::isfinite(s.target_values[i]))
      fail(i, "target " + format_number(s.target_values[i]) + " is not finite");
    for (const auto& [columns, levels, kind] : {std::tuple{&s.declared_observed, &s.observed_levels, "observed"},
                                                std::tuple{&s.declared_known, &s.known_levels, "known"},
                                                std::tuple{&s.declared_static, &s.static_levels, "static"}}) {
      for (size_t c = 0; c < columns->size(); ++c) {
        const double v = (*columns)[c][i];
        const std::string which = std::string("declared ") + kind + " input " + std::to_string(c + 1) + " ";
        if (!std::isfinite(v)) fail(i, which + format_number(v) + " is not finite");
        if (c < levels->size() && !(*levels)[c].empty() &&
            !(v >= 0 && v < static_cast<double>((*levels)[c].size()) && v == std::floor(v))) {
          fail(i, which + format_number(v) + " is not the index of one of its " + std::to_string((*levels)[c].size()) +
                      " levels");
        }
        if (columns == &s.declared_static && i > 0 && v != (*columns)[c][0]) {
          fail(i, which + format_number(v) + " differs from its value " + format_number((*columns)[c][0]) +
                      " at bar 1: a static input is constant within a series");
        }
      }
    }
  }
  validate_future_rows(s, where);
}

}  // namespace qtft::data
