#pragma once

#include <string>
#include <vector>

#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/derived_inputs.h"

namespace qtft::data {

// Raw (unnormalized) features of one series, row i describing bar i + 1. Each row holds
// the derived inputs, then the series' declared columns of that kind at the bar.
struct RawFeatures {
  size_t observed_width = 0, known_width = 0;  // derived plus declared
  std::vector<double> observed;                // rows x observed_width
  std::vector<double> known;                   // rows x known_width
  std::vector<double> target;                  // rows: the transformed target (the log return by default)
  std::vector<double> statics;                 // the declared static inputs, one row (level indices for categoricals)
  std::vector<int64_t> wall_clock_ns;          // scratch: the bars' times on the calendar's clock
};

// Each row: `derived.observed` (derived_inputs.h says what each computes), then the series'
// declared observed columns; `derived.known`, the calendar on the clock of the zone (UTC
// when empty), then the declared known columns. Throws qtft::Error naming the series and
// bar whose target the transform cannot take, or the bar column an input needs and the
// series lacks.
RawFeatures compute_raw_features(const BarSeries& series, const DerivedInputs& derived,
                                 const std::string& calendar_timezone, const TargetDeclaration& target = {});
// The same into `out`, reusing its buffers: a pass over hundreds of series then allocates
// (and the kernel zeroes) its memory once, not once per series.
void compute_raw_features(const BarSeries& series, const DerivedInputs& derived, const std::string& calendar_timezone,
                          const TargetDeclaration& target, RawFeatures& out);
// The level names of a series' declared column `c` of a kind (BarSeries::observed_levels,
// known_levels, static_levels); throws qtft::Error naming the symbol and column when it has none.
const std::vector<std::string>& series_levels(const std::vector<std::vector<std::string>>& levels, size_t c,
                                              const std::string& symbol, const std::string& column);
// The value of the transformed target at bar i >= 1 of `level` (the target column's values).
double transformed_target(TargetTransform transform, const double* level, size_t i);
// The calendar inputs among `known`, resolved once rather than per value: append() pushes
// those of a bar at `wall_clock_ns` (local_wall_clock's, UTC's for an empty zone), in their
// order. Each phase is computed once per bar, by the same expressions whatever the order.
class CalendarFeatures {
 public:
  explicit CalendarFeatures(const std::vector<DerivedInput>& known);
  void append(int64_t wall_clock_ns, std::vector<double>& out) const;

 private:
  bool day_ = false, week_ = false, date_ = false;
  std::vector<uint8_t> slots_;  // DerivedInput - TimeOfDaySin, per calendar input
};
// The terms by name joined by `separator` ("day-of-week,month-of-year"); "none" for none.
std::string calendar_list(const std::vector<CalendarTerm>& terms, const char* separator);

}  // namespace qtft::data
