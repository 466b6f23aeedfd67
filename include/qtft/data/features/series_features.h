#pragma once

// One series' features: computed under a spec (featurize_series), held by a Dataset as views,
// and the known inputs of bars ahead.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "qtft/data/bars/bars.h"
#include "qtft/data/features/input_schema.h"
#include "qtft/data/features/unknown_level.h"

namespace qtft::data {

struct RawFeatures;

// What reading a source left out, for the data summary.
struct ReadNotes {
  std::vector<std::string> unused_columns;  // columns no input reads
  int64_t leading_null_rows = 0;            // bars dropped before a series' declared inputs begin
  int64_t unknown_category_rows = 0;        // rows with a categorical level not seen in training
};

// One symbol's features, one row per bar from its second bar on (the first has no return).
struct SeriesFeatures {
  std::string symbol;
  int64_t symbol_id = 0;
  std::vector<int64_t> timestamp_ns;
  // The close, or the target column's value when the target has a column of its own: the
  // level that forecasts convert back to.
  std::vector<double> close;
  std::vector<float> observed;               // rows x observed.size(), normalized
  std::vector<float> known;                  // rows x known.size(), normalized
  std::vector<float> target;                 // rows: this bar's (transformed target - center) / scale
  std::vector<float> statics;                // the declared static inputs, normalized, one row
  int64_t unknown_category_rows = 0;         // rows with a categorical level the spec's vocabulary lacks
  std::vector<UnknownLevel> unknown_levels;  // those levels, each once, in input order
  int64_t first_bar_ns = 0;                  // the series' first bar, which has no row of its own
  // Rows [bounds[k], bounds[k+1]) form split k (train, validation, test).
  std::array<int64_t, 4> split_bounds{};
  size_t rows() const { return timestamp_ns.size(); }
};

// One symbol's features as a Dataset holds them: views into memory the Dataset keeps alive
// (its own vectors, or a mapped feature store), so that both read alike.
struct SeriesView {
  std::string symbol;
  int64_t symbol_id = 0;
  std::span<const int64_t> timestamp_ns;
  std::span<const double> close;
  std::span<const float> observed;  // rows x observed inputs
  std::span<const float> known;     // rows x known inputs
  std::span<const float> target;
  std::array<int64_t, 4> split_bounds{};
  int64_t first_bar_ns = 0;        // the series' first bar, which has no row of its own
  std::span<const float> statics;  // the declared static inputs, one row
  size_t rows() const { return timestamp_ns.size(); }
};
SeriesView view_of(const SeriesFeatures& features);

// One series' features under `spec`, every row, with no split (all rows in split 0): what
// Dataset::build computes per symbol, shared with serving so that the two cannot drift.
SeriesFeatures featurize_series(const BarSeries& series, const InputSchema& spec, int64_t symbol_id);
void featurize_series(const BarSeries& series, const InputSchema& spec, int64_t symbol_id, RawFeatures& raw,
                      SeriesFeatures& out);
// The known inputs of bars at `timestamps_ns` (UTC), normalized by `spec`: timestamps x
// known. The calendar terms come from the times, on the clock of `spec`'s zone; the declared
// known columns' values are `declared_known` (one vector per column, in the spec's order,
// each at least as long as the times), since they are data, not a function of time.
// Throws qtft::Error naming the first declared column without enough values.
// `symbol_id` picks the series' statistics under per-series normalization; `known_levels`
// are the series' level names of its categorical known columns (BarSeries::known_levels).
// The levels of those columns that the spec's vocabulary lacks take the unknown entry and,
// when `unknown_levels` is given, are appended to it, each once, in input order.
std::vector<float> known_inputs_at(std::span<const int64_t> timestamps_ns,
                                   std::span<const std::vector<double>> declared_known, const InputSchema& spec,
                                   int64_t symbol_id, std::span<const std::vector<std::string>> known_levels = {},
                                   std::vector<UnknownLevel>* unknown_levels = nullptr);
// The same for a spec whose known inputs are all derived (the calendar).
std::vector<float> known_inputs_at(std::span<const int64_t> timestamps_ns, const InputSchema& spec);

}  // namespace qtft::data
