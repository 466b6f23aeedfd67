#pragma once

#include <string>
#include <vector>

#include "qtft/data/bars.h"

namespace qtft::data {

// Raw (unnormalized) features of one series, row i describing bar i + 1. Each row holds
// the derived inputs, then the series' declared columns of that kind at the bar.
struct RawFeatures {
  std::vector<std::string> observed_names;  // the derived inputs
  std::vector<std::string> known_names;
  size_t observed_width = 0, known_width = 0;  // derived plus declared
  std::vector<double> observed;                // rows x observed_width
  std::vector<double> known;                   // rows x known_width
  std::vector<double> target;                  // rows: the transformed target (the log return by default)
  std::vector<double> statics;                 // the declared static inputs, one row (level indices for categoricals)
  std::vector<int64_t> wall_clock_ns;          // scratch: the bars' times on the calendar's clock
};

// Observed (past-only) inputs:
//   log_return   log(close / previous close)
//   hl_range     log(high / low)                 when the bars have open/high/low
//   close_open   log(close / open)               when the bars have open/high/low
//   log_volume   log(1 + volume)                 when the bars have volume
//   bar_gap      log(1 + minutes since the previous bar): marks session and weekend gaps
//   target       the transformed target at the bar, its past for the encoder, when the
//                target is not the log return of the close (which log_return is)
// Known inputs, a function of the bar's timestamp alone, so that a forecast can compute
// them for bars that have not happened yet from their scheduled times:
//   time_of_day_sin/cos, day_of_week_sin/cos     cyclic encodings, on the clock of
//                                                the calendar's zone (UTC when empty)
// bar_gap is observed, not known: the gap before a future bar is only known once the bar
// exists (a halt, a missing bar), and a known bar_gap let backtests see it in advance.
std::vector<std::string> observed_feature_names(bool has_range, bool has_volume, bool past_target = false);
std::vector<std::string> known_feature_names();
// Throws qtft::Error naming the series and bar whose target the transform cannot take.
RawFeatures compute_raw_features(const BarSeries& series, bool has_range, bool has_volume,
                                 const std::string& calendar_timezone, const TargetDeclaration& target = {});
// The same into `out`, reusing its buffers: a pass over hundreds of series then allocates
// (and the kernel zeroes) its memory once, not once per series.
void compute_raw_features(const BarSeries& series, bool has_range, bool has_volume,
                          const std::string& calendar_timezone, const TargetDeclaration& target, RawFeatures& out);
// The value of the transformed target at bar i >= 1 of `level` (the target column's values).
double transformed_target(TargetTransform transform, const double* level, size_t i);
// The known inputs of a bar at `wall_clock_ns` (local_wall_clock's, UTC's for an empty
// zone), in known_feature_names() order, appended.
void append_known_features(int64_t wall_clock_ns, std::vector<double>& out);

}  // namespace qtft::data
