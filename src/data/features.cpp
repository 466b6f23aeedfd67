#include "qtft/data/detail/features.h"

#include <cmath>
#include <numbers>
#include <span>

#include "qtft/common/detail/calendar.h"
#include "qtft/data/local_time.h"

namespace qtft::data {

std::vector<std::string> observed_feature_names(bool has_range, bool has_volume) {
  std::vector<std::string> names{"log_return"};
  if (has_range) {
    names.push_back("hl_range");
    names.push_back("close_open");
  }
  if (has_volume) names.push_back("log_volume");
  names.push_back("bar_gap");
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

RawFeatures compute_raw_features(const BarSeries& s, bool has_range, bool has_volume,
                                 const std::string& calendar_timezone) {
  RawFeatures f;
  compute_raw_features(s, has_range, has_volume, calendar_timezone, f);
  return f;
}

void compute_raw_features(const BarSeries& s, bool has_range, bool has_volume, const std::string& calendar_timezone,
                          RawFeatures& f) {
  f.observed_names = observed_feature_names(has_range, has_volume);
  f.known_names = known_feature_names();
  f.observed_width = f.observed_names.size() + s.declared_observed.size();
  f.known_width = f.known_names.size() + s.declared_known.size();
  f.observed.clear();
  f.known.clear();
  f.log_return.clear();
  const size_t rows = s.size() > 0 ? s.size() - 1 : 0;
  f.observed.reserve(rows * f.observed_width);
  f.known.reserve(rows * f.known_width);
  f.log_return.reserve(rows);
  // UTC needs no conversion: the bars' own times are the calendar's clock.
  std::span<const int64_t> clock = s.timestamp_ns;
  if (!calendar_timezone.empty()) {
    local_wall_clock(s.timestamp_ns, calendar_timezone, f.wall_clock_ns);
    clock = f.wall_clock_ns;
  }
  for (size_t i = 1; i < s.size(); ++i) {
    double r = std::log(s.close[i] / s.close[i - 1]);
    f.log_return.push_back(r);
    f.observed.push_back(r);
    if (has_range) {
      f.observed.push_back(std::log(s.high[i] / s.low[i]));
      f.observed.push_back(std::log(s.close[i] / s.open[i]));
    }
    if (has_volume) f.observed.push_back(std::log1p(s.volume[i]));
    double gap_minutes = static_cast<double>(s.timestamp_ns[i] - s.timestamp_ns[i - 1]) / (60.0 * kNanosPerSecond);
    f.observed.push_back(std::log1p(gap_minutes));
    for (const auto& column : s.declared_observed) f.observed.push_back(column[i]);
    append_known_features(clock[i], f.known);
    for (const auto& column : s.declared_known) f.known.push_back(column[i]);
  }
}

}  // namespace qtft::data
