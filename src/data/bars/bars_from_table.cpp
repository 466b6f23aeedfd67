// The Arrow edge of the bar reader: Arrow columns of any supported type become flat
// vectors, then one pass in file order validates every row and groups rows by symbol.
#include <arrow/api.h>
#include <arrow/util/value_parsing.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_map>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/detail/arrow_columns.h"

namespace qtft::data {
namespace {

constexpr double kMinPrice = 1e-300;

// Where each series stands with its declared inputs: still in the warm-up of nulls (its bars
// dropped), or begun at a row, with the last values for forward-fill.
struct DeclaredState {
  bool begun = false;
  int64_t first_row = -1;  // -1: begun in an earlier part of the source
  std::vector<double> last;
};

std::string column_list(const arrow::Table& table) {
  std::string out;
  for (const auto& f : table.schema()->fields()) out += (out.empty() ? "" : ", ") + f->name();
  return out;
}

}  // namespace

InputDeclaration resolve_declared_inputs(const arrow::Schema& schema, const BarReadOptions& options,
                                         const std::string& source, std::vector<std::string>* unused) {
  const auto& names = options.columns;
  std::vector<std::string> columns;
  for (const auto& f : schema.fields()) columns.push_back(f->name());
  // The close column as bars_from_table picks it: 'price' stands in for an absent 'close'.
  const bool price = names.close == "close" && !schema.GetFieldByName("close") && schema.GetFieldByName("price");
  return resolve_inputs(options.inputs, columns,
                        {names.open, names.high, names.low, price ? "price" : names.close, names.volume},
                        {names.timestamp, names.symbol}, source, unused);
}

BarSet bars_from_table(const arrow::Table& table, const std::string& source, const BarReadOptions& options,
                       DeclaredCarry* carry, int64_t first_row) {
  const auto& names = options.columns;
  if (table.num_rows() == 0) throw Error(source + ": the file holds no rows");
  // Arrow finds no column by a name that two columns share; say so rather than "missing".
  for (const auto& field : table.schema()->fields()) {
    const auto count = table.schema()->GetAllFieldIndices(field->name()).size();
    if (count > 1) {
      throw Error(source + ": has " + std::to_string(count) + " columns named '" + field->name() +
                  "'; rename all but one");
    }
  }
  auto require = [&](const std::string& name, const std::string& role) {
    const auto* col = find_column(table, name);
    if (!col) {
      throw Error(source + ": missing " + role + " column '" + name + "' (columns: " + column_list(table) + ")");
    }
    return Column{source, name, col, first_row};
  };
  auto optional = [&](const std::string& name) { return Column{source, name, find_column(table, name), first_row}; };

  Column ts_col = require(names.timestamp, "timestamp");
  Column close_col = optional(names.close);
  if (!close_col.array && names.close == "close") close_col = optional("price");
  if (!close_col.array) close_col = require(names.close, "close (or price)");
  Column open_col = optional(names.open), high_col = optional(names.high), low_col = optional(names.low),
         volume_col = optional(names.volume), symbol_col = optional(names.symbol);

  int range_columns = !!open_col.array + !!high_col.array + !!low_col.array;
  if (range_columns != 0 && range_columns != 3) {
    throw Error(source + ": has only some of the columns '" + names.open + "', '" + names.high + "', '" + names.low +
                "'; give all three or none (close-only data)");
  }

  BarSet bars;
  bars.source = source;
  if (range_columns == 3) bars.fields.add(BarField::OpenHighLow);
  if (volume_col.array != nullptr) bars.fields.add(BarField::Volume);
  bars.declared = resolve_declared_inputs(*table.schema(), options, source, &bars.unused_columns);
  // A source read in parts keeps its levels in the carry: a level has one index in every part.
  std::unordered_map<std::string, CategoryLevels> own_levels;
  auto& levels = carry ? carry->levels : own_levels;
  const auto declared = declared_columns(table, source, bars.declared, first_row, levels);
  const size_t n_observed = bars.declared.observed.size() + bars.declared.observed_categorical.size();
  const size_t n_known = bars.declared.known.size() + bars.declared.known_categorical.size();
  const size_t first_static = n_observed + n_known;
  const auto& target_declaration = bars.declared.target;
  std::optional<DeclaredColumn> target;  // another column than the close
  if (!target_declaration.column.empty()) target = declared_column(table, source, target_declaration.column, first_row);

  auto ts = timestamp_values(ts_col, options.epoch_unit);
  std::vector<uint8_t> future;  // per row: a future row (empty close); empty when none is
  auto close = close_values(close_col, options.future_rows, future);
  std::vector<double> open, high, low, volume;
  if (bars.fields.has(BarField::OpenHighLow)) {
    open = bar_values(open_col, future);
    high = bar_values(high_col, future);
    low = bar_values(low_col, future);
  }
  if (bars.fields.has(BarField::Volume)) volume = bar_values(volume_col, future);
  // The price columns the file has, each with the values its bars take row by row; the
  // target's column is read apart, as it is checked row by row.
  std::vector<std::pair<std::vector<double> BarSeries::*, const std::vector<double>*>> prices;
  for (const auto& [member, values] :
       {std::pair{&BarSeries::close, &close}, std::pair{&BarSeries::open, &open}, std::pair{&BarSeries::high, &high},
        std::pair{&BarSeries::low, &low}, std::pair{&BarSeries::volume, &volume}}) {
    if (!values->empty()) prices.emplace_back(member, values);
  }
  SymbolCodes symbols;
  if (symbol_col.array) {
    if (!options.symbol.empty()) {
      throw Error(source + ": has a symbol column '" + names.symbol + "'; --symbol " + options.symbol +
                  " names the series of files without one");
    }
    symbols = symbol_values(symbol_col);
  } else {
    symbols.codes.assign(close.size(), 0);
    symbols.names.push_back(options.symbol.empty() ? std::filesystem::path(source).stem().string() : options.symbol);
  }

  bars.series.resize(symbols.names.size());
  {
    // Each series' size up front: growing millions of bars by doubling copies them twice over.
    std::vector<size_t> rows(symbols.names.size(), 0);
    for (int32_t code : symbols.codes) ++rows[static_cast<size_t>(code)];
    for (size_t s = 0; s < symbols.names.size(); ++s) {
      auto& series = bars.series[s];
      series.symbol = symbols.names[s];
      series.timestamp_ns.reserve(rows[s]);
      for (const auto& price : prices) (series.*price.first).reserve(rows[s]);
      series.declared_observed.resize(n_observed);
      for (auto& column : series.declared_observed) column.reserve(rows[s]);
      if (target) series.target_values.reserve(rows[s]);
      series.declared_known.resize(n_known);
      for (auto& column : series.declared_known) column.reserve(rows[s]);
      series.declared_static.resize(declared.size() - first_static);
      for (auto& column : series.declared_static) column.reserve(rows[s]);
    }
  }
  std::vector<int64_t> last_row(symbols.names.size(), -1);
  std::vector<DeclaredState> state(symbols.names.size());
  if (carry) {
    for (size_t s = 0; s < symbols.names.size(); ++s) {
      auto it = carry->last.find(symbols.names[s]);
      if (it != carry->last.end() && it->second.size() == declared.size()) state[s] = {true, -1, it->second};
    }
  }
  const bool forward_fill = bars.declared.missing == MissingValues::ForwardFill;
  auto has_null = [&](size_t r) {
    return (target && !target->valid[r]) ||
           std::any_of(declared.begin(), declared.end(), [&](const DeclaredColumn& d) { return !d.valid[r]; });
  };
  const bool warm_up = !declared.empty() || target;

  auto check_price = [](const Column& col, int64_t row, double v) {
    if (!std::isfinite(v)) col.fail_at(row, "value " + format_number(v) + " is not finite");
    if (v <= 0) col.fail_at(row, "price " + format_number(v) + " is not positive");
    // Below about 1e-300 the returns and ranges computed from a price overflow or lose
    // all precision: no market quotes such a price, so it is a corrupt value.
    if (v < kMinPrice) col.fail_at(row, "price " + format_number(v) + " is too small to be a price (below 1e-300)");
  };
  std::vector<int64_t> first_future_row(symbols.names.size(), -1);
  for (int64_t row = 0; row < static_cast<int64_t>(close.size()); ++row) {
    auto r = static_cast<size_t>(row);
    auto code = static_cast<size_t>(symbols.codes[r]);
    auto& series = bars.series[code];
    if (!future.empty() && future[r]) {
      // A bar ahead: its time and the known inputs there, nothing of its prices.
      for (size_t c = n_observed; c < first_static; ++c) {
        if (!declared[c].valid[r]) {
          declared[c].col.fail_at(row,
                                  "empty in a future row of symbol '" + series.symbol +
                                      "' (its close is empty): a forecast needs the known inputs of the bars ahead");
        }
      }
      const bool after_future = !series.future_timestamp_ns.empty();
      if (after_future || last_row[code] >= 0) {
        const int64_t prev = after_future ? series.future_timestamp_ns.back() : series.timestamp_ns.back();
        if (ts[r] <= prev) {
          ts_col.fail_at(row,
                         "future row of symbol '" + series.symbol + "' at " + format_utc(ts[r]) + " is not after " +
                             format_utc(prev) + ", row " +
                             std::to_string(first_row + (after_future ? first_future_row[code] : last_row[code]) + 1));
        }
      }
      if (!after_future) first_future_row[code] = row;
      series.future_timestamp_ns.push_back(ts[r]);
      series.future_known.resize(n_known);
      for (size_t c = n_observed; c < first_static; ++c)
        series.future_known[c - n_observed].push_back(declared[c].values[r]);
      continue;
    }
    if (first_future_row[code] >= 0) {
      close_col.fail_at(row, "a bar of symbol '" + series.symbol + "' after its future rows (row " +
                                 std::to_string(first_row + first_future_row[code] + 1) +
                                 " has an empty close): future rows come after the last bar");
    }
    check_price(close_col, row, close[r]);
    if (bars.fields.has(BarField::OpenHighLow)) {
      check_price(open_col, row, open[r]);
      check_price(high_col, row, high[r]);
      check_price(low_col, row, low[r]);
      if (high[r] < low[r]) {
        high_col.fail_at(row, "high " + format_number(high[r]) + " is below low " + format_number(low[r]));
      }
    }
    if (bars.fields.has(BarField::Volume)) {
      if (!std::isfinite(volume[r])) {
        volume_col.fail_at(row, "value " + format_number(volume[r]) + " is not finite");
      }
      if (volume[r] < 0) volume_col.fail_at(row, "volume " + format_number(volume[r]) + " is negative");
    }
    auto& st = state[code];
    if (warm_up && !st.begun) {
      // A rolling feature's warm-up: the series starts at its first complete row.
      if (has_null(r)) {
        ++bars.leading_null_rows;
        continue;
      }
      st = {true, row, std::vector<double>(declared.size())};
    }
    for (size_t c = 0; c < declared.size(); ++c) {
      const auto& d = declared[c];
      if (d.valid[r]) {
        // A static input's value is the series' first; any other is an error (the first
        // row of a series begun in an earlier part compares with that part's value).
        if (c >= first_static && st.first_row != row && d.values[r] != st.last[c]) {
          auto shown = [&](double v) {
            const auto it = levels.find(d.col.name);
            return it == levels.end() ? format_number(v) : "'" + it->second.names.at(static_cast<size_t>(v)) + "'";
          };
          const std::string since =
              st.first_row >= 0 ? "row " + std::to_string(first_row + st.first_row + 1) : "an earlier file";
          d.col.fail_at(row, "static input of symbol '" + series.symbol + "' changes to " + shown(d.values[r]) +
                                 " from " + shown(st.last[c]) + " (" + since +
                                 "): a static input is constant within a series");
        }
        st.last[c] = d.values[r];
      } else if (!forward_fill) {
        const std::string since =
            st.first_row >= 0 ? "row " + std::to_string(first_row + st.first_row + 1) : "an earlier file";
        d.col.fail_at(row, "missing value (null or NaN) inside symbol '" + series.symbol +
                               "', whose declared inputs are complete since " + since +
                               ": give --missing forward-fill to carry the previous value forward");
      }
    }
    if (last_row[code] >= 0) {
      int64_t prev = series.timestamp_ns.back();
      if (ts[r] <= prev) {
        ts_col.fail_at(row, std::string(ts[r] == prev ? "duplicate" : "unsorted") + " timestamp " + format_utc(ts[r]) +
                                " for symbol '" + series.symbol + "': row " +
                                std::to_string(first_row + last_row[code] + 1) + " has " + format_utc(prev));
      }
    }
    last_row[code] = row;
    series.timestamp_ns.push_back(ts[r]);
    for (const auto& [member, values] : prices) (series.*member).push_back((*values)[r]);
    if (target) {
      const double v = target->values[r];
      if (!target->valid[r]) {
        target->col.fail_at(row, "missing value (null or NaN) inside symbol '" + series.symbol +
                                     "': the target has no value at this bar (a target is never filled forward)");
      }
      if (const char* domain = target_domain_error(target_declaration.transform, v)) {
        target->col.fail_at(row, "value " + format_number(v) + " " + domain);
      }
      series.target_values.push_back(v);
    }
    for (size_t c = 0; c < declared.size(); ++c) {
      auto& column = c < n_observed     ? series.declared_observed[c]
                     : c < first_static ? series.declared_known[c - n_observed]
                                        : series.declared_static[c - first_static];
      column.push_back(st.last[c]);
    }
  }
  if (bars.declared.has_categoricals()) {
    // Every series holds the levels so far of each categorical column (the same list, as
    // their indices are the column's), so that a series stands alone.
    auto levels_of = [&](const std::vector<std::string>& reals, const std::vector<std::string>& categoricals) {
      std::vector<std::vector<std::string>> out(reals.size());
      for (const auto& name : categoricals) out.push_back(levels.at(name).names);
      return out;
    };
    const auto observed_levels = levels_of(bars.declared.observed, bars.declared.observed_categorical);
    const auto known_levels = levels_of(bars.declared.known, bars.declared.known_categorical);
    const auto static_levels = levels_of(bars.declared.statics, bars.declared.static_categorical);
    for (auto& series : bars.series) {
      series.observed_levels = observed_levels;
      series.known_levels = known_levels;
      series.static_levels = static_levels;
    }
  }
  if (carry) {
    for (size_t s = 0; s < symbols.names.size(); ++s) {
      if (state[s].begun) carry->last[symbols.names[s]] = state[s].last;
    }
  }
  return bars;
}

}  // namespace qtft::data
