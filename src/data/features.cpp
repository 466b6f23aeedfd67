#include "qtft/data/detail/features.h"

#include <cmath>
#include <numbers>
#include <span>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/local_time.h"

namespace qtft::data {

std::vector<std::string> observed_feature_names(bool has_range, bool has_volume, bool past_target) {
  std::vector<std::string> names{"log_return"};
  if (has_range) {
    names.push_back("hl_range");
    names.push_back("close_open");
  }
  if (has_volume) names.push_back("log_volume");
  names.push_back("bar_gap");
  if (past_target) names.push_back("target");
  return names;
}

std::vector<std::string> known_feature_names() {
  return {"time_of_day_sin", "time_of_day_cos", "day_of_week_sin", "day_of_week_cos"};
}

void append_known_features(int64_t t, std::vector<double>& out) {
  constexpr double two_pi = 2.0 * std::numbers::pi;
  double day_phase = two_pi * static_cast<double>(seconds_of_day(t)) / kSecondsPerDay;
  double week_phase = two_pi * day_of_week(t) / 7.0;
  out.push_back(std::sin(day_phase));
  out.push_back(std::cos(day_phase));
  out.push_back(std::sin(week_phase));
  out.push_back(std::cos(week_phase));
}

double transformed_target(TargetTransform transform, const double* level, size_t i) {
  switch (transform) {
    case TargetTransform::LogReturn: return std::log(level[i] / level[i - 1]);
    case TargetTransform::None: return level[i];
    case TargetTransform::Log: return std::log(level[i]);
    case TargetTransform::Log1p: return std::log1p(level[i]);
  }
  return level[i];
}

RawFeatures compute_raw_features(const BarSeries& s, bool has_range, bool has_volume,
                                 const std::string& calendar_timezone, const TargetDeclaration& target) {
  RawFeatures f;
  compute_raw_features(s, has_range, has_volume, calendar_timezone, target, f);
  return f;
}

void compute_raw_features(const BarSeries& s, bool has_range, bool has_volume, const std::string& calendar_timezone,
                          const TargetDeclaration& target, RawFeatures& f) {
  const bool past_target = !target.is_close_log_return();
  const bool own_column = !target.column.empty();
  if (own_column && s.target_values.size() != s.size()) {
    throw Error("symbol '" + s.symbol + "': the target is column '" + target.column + "', but its bars carry " +
                std::to_string(s.target_values.size()) + " values of it for " + std::to_string(s.size()) + " bars");
  }
  const double* level = own_column ? s.target_values.data() : s.close.data();
  // The transform's domain, bar by bar, before any arithmetic (a log return reads bar 0 too).
  for (size_t i = own_column ? 0 : s.size(); i < s.size(); ++i) {
    if (const char* why = target_domain_error(target.transform, level[i])) {
      throw Error("symbol '" + s.symbol + "', bar " + std::to_string(i + 1) + " (" + format_utc(s.timestamp_ns[i]) +
                  "): target column '" + target.column + "' value " + format_number(level[i]) + " " + why);
    }
  }
  f.observed_names = observed_feature_names(has_range, has_volume, past_target);
  f.known_names = known_feature_names();
  f.statics.clear();
  for (const auto& column : s.declared_static) f.statics.push_back(column.empty() ? 0.0 : column.front());
  f.observed_width = f.observed_names.size() + s.declared_observed.size();
  f.known_width = f.known_names.size() + s.declared_known.size();
  f.observed.clear();
  f.known.clear();
  f.target.clear();
  const size_t rows = s.size() > 0 ? s.size() - 1 : 0;
  f.observed.reserve(rows * f.observed_width);
  f.known.reserve(rows * f.known_width);
  f.target.reserve(rows);
  // UTC needs no conversion: the bars' own times are the calendar's clock.
  std::span<const int64_t> clock = s.timestamp_ns;
  if (!calendar_timezone.empty()) {
    local_wall_clock(s.timestamp_ns, calendar_timezone, f.wall_clock_ns);
    clock = f.wall_clock_ns;
  }
  for (size_t i = 1; i < s.size(); ++i) {
    double r = std::log(s.close[i] / s.close[i - 1]);
    f.observed.push_back(r);
    if (has_range) {
      f.observed.push_back(std::log(s.high[i] / s.low[i]));
      f.observed.push_back(std::log(s.close[i] / s.open[i]));
    }
    if (has_volume) f.observed.push_back(std::log1p(s.volume[i]));
    double gap_minutes = static_cast<double>(s.timestamp_ns[i] - s.timestamp_ns[i - 1]) / (60.0 * kNanosPerSecond);
    f.observed.push_back(std::log1p(gap_minutes));
    // The close's log return is computed once, as log_return and as the target, bitwise both.
    const double y = past_target ? transformed_target(target.transform, level, i) : r;
    if (past_target) f.observed.push_back(y);
    f.target.push_back(y);
    for (const auto& column : s.declared_observed) f.observed.push_back(column[i]);
    append_known_features(clock[i], f.known);
    for (const auto& column : s.declared_known) f.known.push_back(column[i]);
  }
}

}  // namespace qtft::data
