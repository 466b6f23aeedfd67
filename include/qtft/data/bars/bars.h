#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qtft/data/bars/input_declaration.h"

namespace qtft::data {

// One symbol's bars in time order. Prices are doubles because futures prices with many
// digits lose the tick in float32; features are computed in double and stored as float.
struct BarSeries {
  std::string symbol;
  std::vector<int64_t> timestamp_ns;    // UTC nanoseconds since the epoch, strictly increasing
  std::vector<double> open, high, low;  // empty when the source had only a close/price column
  std::vector<double> close;
  std::vector<double> volume;  // empty when the source had no volume (FX quotes)
  // The values of the declared input columns (BarSet::declared), one vector per column, in
  // the order of InputDeclaration::observed_columns() and known_columns(): each kind's reals,
  // then its categoricals. A categorical cell holds its level's index in the column's levels.
  std::vector<std::vector<double>> declared_observed, declared_known;
  // The declared static columns (static_columns()), one value per bar, the same at every bar.
  std::vector<std::vector<double>> declared_static;
  // The level names of the declared columns, parallel to declared_observed, declared_known
  // and declared_static: empty for a real column, and no entry at all past the last
  // categorical column of a kind (so a series without categoricals leaves them empty).
  std::vector<std::vector<std::string>> observed_levels, known_levels, static_levels;
  // The target column's values (BarSet::declared.target.column), one per bar; empty when
  // the target is the close.
  std::vector<double> target_values;
  // The bars ahead, for a forecast: their scheduled times (after the last bar, increasing)
  // and the values of the declared known columns there, one vector per column in the order
  // of declared_known. Empty for training data.
  std::vector<int64_t> future_timestamp_ns;
  std::vector<std::vector<double>> future_known;
  size_t size() const { return close.size(); }
};

// The columns of a series with one value per bar, other than the declared inputs, as members
// with the names messages give them: the timestamps, then the prices, the volume and the
// target's values. An empty optional column (no open/high/low, no volume, the close as the
// target) has no value at all. Code that slices, appends, checks or spills bars visits them
// through this one list; the declared inputs' columns are the vectors of each kind.
struct BarColumn {
  std::vector<double> BarSeries::*values;
  const char* name;
  bool optional;
};
inline constexpr BarColumn kPriceColumns[] = {
    {&BarSeries::open, "open", true},     {&BarSeries::high, "high", true},
    {&BarSeries::low, "low", true},       {&BarSeries::close, "close", false},
    {&BarSeries::volume, "volume", true}, {&BarSeries::target_values, "the target column", true},
};
// Calls visit(member) for the timestamps (std::vector<int64_t> BarSeries::*) and then each of
// kPriceColumns' members (std::vector<double> BarSeries::*).
template <class Visit>
void for_each_bar_column(Visit&& visit) {
  visit(&BarSeries::timestamp_ns);
  for (const auto& column : kPriceColumns) visit(column.values);
}
// Calls visit(columns) for each kind's declared columns: observed, known, static.
template <class Series, class Visit>
void for_each_declared_kind(Series& series, Visit&& visit) {
  visit(series.declared_observed);
  visit(series.declared_known);
  visit(series.declared_static);
}

// Bars [begin, end) of a series, every column it has (a forecast's latest bars); the
// future rows go with a slice that ends at the last bar.
BarSeries slice_bars(const BarSeries& series, size_t begin, size_t end);
// Drops all but the last `keep` bars of a series (its future rows stay).
void keep_last_bars(BarSeries& series, size_t keep);
// Appends `from`'s bars and future rows (the same columns, later in time) to `to`; throws
// qtft::Error when `to` has future rows and `from` has bars, which would follow them.
void append_bars(BarSeries& to, const BarSeries& from);

// Validated bars from one source, one series per symbol in order of first appearance.
struct BarSet {
  std::string source;  // the file name, or "embedded synthetic data"
  BarFields fields;    // the optional columns present: open/high/low, volume
  // The declared input columns every series carries (resolved: the columns themselves), and
  // the file's columns that no input reads.
  InputDeclaration declared;
  std::vector<std::string> unused_columns;
  // Bars dropped, over all series, before each series' first row with every declared input.
  int64_t leading_null_rows = 0;
  std::vector<BarSeries> series;
  size_t total_rows() const;
};

// Keeps each series' bars timed in [from_ns, through_ns] and drops the series left without
// one (a walk-forward fold's view of the data).
void keep_bars_between(BarSet& bars, int64_t from_ns, int64_t through_ns);

// Names of the input columns; all configurable from the command line.
struct ColumnNames {
  std::string timestamp = "timestamp";
  std::string open = "open";
  std::string high = "high";
  std::string low = "low";
  std::string close = "close";  // "price" is accepted when no column has this name
  std::string volume = "volume";
  std::string symbol = "symbol";
};

// How integer timestamps are read. Auto takes values of magnitude 1e11 or more as
// milliseconds (1e11 s is the year 5138, 1e11 ms is 1973).
enum class EpochUnit { Auto, Seconds, Milliseconds };

struct BarReadOptions {
  ColumnNames columns;
  EpochUnit epoch_unit = EpochUnit::Auto;
  // Names the one series of a file without a symbol column (default: the file's stem).
  // A file with a symbol column names its own series; giving both is an error.
  std::string symbol;
  // Columns read as the model's real inputs besides those derived from the bars.
  InputDeclaration inputs;
  // Rows after a series' last bar whose close is empty are its future rows (what a forecast
  // reads the known inputs of the bars ahead from): their timestamps and declared known
  // columns must be filled; their other cells are not read. Off, an empty close is an error.
  bool future_rows = false;
};

// The rules files are read with, for bars built in memory (an embedding program's feed):
// equal lengths, strictly increasing timestamps, finite positive prices, high >= low,
// finite non-negative volume, finite declared inputs, one value per bar, static inputs the
// same at every bar, categorical cells an index into their levels; future rows after
// the last bar, each with a finite value of every declared known column. Throws qtft::Error
// naming `source`, the bar, field and value.
void validate_series(const BarSeries& series, const std::string& source);

// Reads and validates bars. The format comes from the function; errors name the file,
// column, 1-based data row and value at fault.
BarSet read_bars_parquet(const std::string& path, const BarReadOptions& options = {});
BarSet read_bars_csv(const std::string& path, const BarReadOptions& options = {});

// Writes bars as Parquet (timestamp[ns, UTC], symbol, open, high, low, close, volume),
// atomically.
void write_bars_parquet(const BarSet& bars, const std::string& path);
// The same columns as CSV (timestamps as ISO-8601 text), atomically.
void write_bars_csv(const BarSet& bars, const std::string& path);

}  // namespace qtft::data
