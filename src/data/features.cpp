#include "qtft/data/detail/features.h"

#include <cmath>
#include <numbers>
#include <span>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/local_time.h"

namespace qtft::data {

void append_calendar_features(int64_t t, const std::vector<DerivedInput>& known, std::vector<double>& out) {
  constexpr double two_pi = 2.0 * std::numbers::pi;
  // Each phase once per bar, however many of the terms read it.
  double day_phase = 0, week_phase = 0, month_phase = 0, year_phase = 0;
  bool dated = false;
  CivilDate date;
  for (DerivedInput input : known) {
    using enum DerivedInput;
    switch (input) {
      case TimeOfDaySin:
      case TimeOfDayCos:
        day_phase = two_pi * static_cast<double>(seconds_of_day(t)) / kSecondsPerDay;
        out.push_back(input == TimeOfDaySin ? std::sin(day_phase) : std::cos(day_phase));
        break;
      case DayOfWeekSin:
      case DayOfWeekCos:
        week_phase = two_pi * day_of_week(t) / 7.0;
        out.push_back(input == DayOfWeekSin ? std::sin(week_phase) : std::cos(week_phase));
        break;
      case DayOfMonthSin:
      case DayOfMonthCos:
      case MonthOfYearSin:
      case MonthOfYearCos:
        if (!dated) date = civil_date(t), dated = true;
        month_phase = two_pi * (date.day - 1) / date.days_in_month;
        year_phase = two_pi * (date.month - 1) / 12.0;
        if (input == DayOfMonthSin) out.push_back(std::sin(month_phase));
        if (input == DayOfMonthCos) out.push_back(std::cos(month_phase));
        if (input == MonthOfYearSin) out.push_back(std::sin(year_phase));
        if (input == MonthOfYearCos) out.push_back(std::cos(year_phase));
        break;
      default: break;  // not a calendar input: not a function of the time
    }
  }
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

RawFeatures compute_raw_features(const BarSeries& s, const DerivedInputs& derived, const std::string& calendar_timezone,
                                 const TargetDeclaration& target) {
  RawFeatures f;
  compute_raw_features(s, derived, calendar_timezone, target, f);
  return f;
}

void compute_raw_features(const BarSeries& s, const DerivedInputs& derived, const std::string& calendar_timezone,
                          const TargetDeclaration& target, RawFeatures& f) {
  const bool own_column = !target.column.empty();
  if (own_column && s.target_values.size() != s.size()) {
    throw Error("symbol '" + s.symbol + "': the target is column '" + target.column + "', but its bars carry " +
                std::to_string(s.target_values.size()) + " values of it for " + std::to_string(s.size()) + " bars");
  }
  for (DerivedInput input : derived.observed) {
    const BarFields needed = fields_read_by(input);
    if ((needed.has(BarField::OpenHighLow) && s.open.size() != s.size()) ||
        (needed.has(BarField::Volume) && s.volume.size() != s.size())) {
      throw Error("symbol '" + s.symbol + "': input " + derived_input_name(input) + " reads " +
                  (needed.has(BarField::Volume) ? "volume" : "open, high and low") + ", which its bars lack");
    }
  }
  const double* level = own_column ? s.target_values.data() : s.close.data();
  // The transform's domain, bar by bar, before any arithmetic (a log return reads bar 0 too).
  for (size_t i = own_column ? 0 : s.size(); i < s.size(); ++i) {
    if (const char* why = target_domain_error(target.transform, level[i])) {
      throw Error("symbol '" + s.symbol + "', bar " + std::to_string(i + 1) + " (" + format_utc(s.timestamp_ns[i]) +
                  "): target column '" + target.column + "' value " + format_number(level[i]) + " " + why);
    }
  }
  f.statics.clear();
  for (const auto& column : s.declared_static) f.statics.push_back(column.empty() ? 0.0 : column.front());
  f.observed_width = derived.observed.size() + s.declared_observed.size();
  f.known_width = derived.known.size() + s.declared_known.size();
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
  const bool past_target = !target.is_close_log_return();
  for (size_t i = 1; i < s.size(); ++i) {
    const double r = std::log(s.close[i] / s.close[i - 1]);
    // The close's log return is computed once, as log_return and as the target, bitwise both.
    const double y = past_target ? transformed_target(target.transform, level, i) : r;
    for (DerivedInput input : derived.observed) {
      using enum DerivedInput;
      switch (input) {
        case LogReturn: f.observed.push_back(r); break;
        case HlRange: f.observed.push_back(std::log(s.high[i] / s.low[i])); break;
        case CloseOpen: f.observed.push_back(std::log(s.close[i] / s.open[i])); break;
        case LogVolume: f.observed.push_back(std::log1p(s.volume[i])); break;
        case BarGap: {
          double gap_minutes =
              static_cast<double>(s.timestamp_ns[i] - s.timestamp_ns[i - 1]) / (60.0 * kNanosPerSecond);
          f.observed.push_back(std::log1p(gap_minutes));
          break;
        }
        case PastTarget: f.observed.push_back(y); break;
        default: f.observed.push_back(0.0); break;  // a calendar input is known, not observed: refused earlier
      }
    }
    f.target.push_back(y);
    for (const auto& column : s.declared_observed) f.observed.push_back(column[i]);
    append_calendar_features(clock[i], derived.known, f.known);
    for (const auto& column : s.declared_known) f.known.push_back(column[i]);
  }
}

}  // namespace qtft::data
