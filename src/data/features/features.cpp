#include "qtft/data/features/detail/features.h"

#include <cmath>
#include <numbers>
#include <span>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/local_time.h"

namespace qtft::data {

CalendarFeatures::CalendarFeatures(const std::vector<DerivedInput>& known) {
  for (DerivedInput input : known) {
    if (!is_calendar_input(input)) continue;  // not a function of the time
    const auto slot = static_cast<uint8_t>(static_cast<int>(input) - static_cast<int>(DerivedInput::TimeOfDaySin));
    day_ |= slot < 2;
    week_ |= slot == 2 || slot == 3;
    date_ |= slot >= 4;
    slots_.push_back(slot);
  }
}

void CalendarFeatures::append(int64_t t, std::vector<double>& out) const {
  constexpr double two_pi = 2.0 * std::numbers::pi;
  double v[8];
  if (day_) {
    const double day_phase = two_pi * static_cast<double>(seconds_of_day(t)) / kSecondsPerDay;
    v[0] = std::sin(day_phase), v[1] = std::cos(day_phase);
  }
  if (week_) {
    const double week_phase = two_pi * day_of_week(t) / 7.0;
    v[2] = std::sin(week_phase), v[3] = std::cos(week_phase);
  }
  if (date_) {
    const CivilDate date = civil_date(t);
    const double month_phase = two_pi * (date.day - 1) / date.days_in_month;
    const double year_phase = two_pi * (date.month - 1) / 12.0;
    v[4] = std::sin(month_phase), v[5] = std::cos(month_phase);
    v[6] = std::sin(year_phase), v[7] = std::cos(year_phase);
  }
  for (uint8_t slot : slots_) out.push_back(v[slot]);
}

std::string calendar_list(const std::vector<CalendarTerm>& terms, const char* separator) {
  std::string out;
  for (CalendarTerm term : terms) out += (out.empty() ? "" : separator) + std::string(calendar_term_name(term));
  return out.empty() ? "none" : out;
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
  // The observed producers as slots of `v` below: DerivedInput's values, log_return first.
  static_assert(static_cast<int>(DerivedInput::LogReturn) == 0 && static_cast<int>(DerivedInput::PastTarget) == 5);
  std::vector<uint8_t> slots;
  bool range = false, volume = false, gap = false;
  for (DerivedInput input : derived.observed) {
    if (is_calendar_input(input)) throw Error("input " + std::string(derived_input_name(input)) + " is not observed");
    slots.push_back(static_cast<uint8_t>(input));
    range |= input == DerivedInput::HlRange || input == DerivedInput::CloseOpen;
    volume |= input == DerivedInput::LogVolume;
    gap |= input == DerivedInput::BarGap;
  }
  const CalendarFeatures calendar(derived.known);
  double v[6] = {0, 0, 0, 0, 0, 0};
  for (size_t i = 1; i < s.size(); ++i) {
    const double r = std::log(s.close[i] / s.close[i - 1]);
    // The close's log return is computed once, as log_return and as the target, bitwise both.
    const double y = past_target ? transformed_target(target.transform, level, i) : r;
    v[0] = r;
    if (range) v[1] = std::log(s.high[i] / s.low[i]), v[2] = std::log(s.close[i] / s.open[i]);
    if (volume) v[3] = std::log1p(s.volume[i]);
    if (gap) {
      double gap_minutes = static_cast<double>(s.timestamp_ns[i] - s.timestamp_ns[i - 1]) / (60.0 * kNanosPerSecond);
      v[4] = std::log1p(gap_minutes);
    }
    v[5] = y;
    for (uint8_t slot : slots) f.observed.push_back(v[slot]);
    f.target.push_back(y);
    for (const auto& column : s.declared_observed) f.observed.push_back(column[i]);
    calendar.append(clock[i], f.known);
    for (const auto& column : s.declared_known) f.known.push_back(column[i]);
  }
}

}  // namespace qtft::data
