#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qtft::data {

// The optional columns of a set of bars: every source has a timestamp and a close; open,
// high and low come as a group, volume on its own (FX quotes have none).
enum class BarField : uint8_t { OpenHighLow = 1, Volume = 2 };
struct BarFields {
  uint8_t mask = 0;
  static BarFields all() {
    return {static_cast<uint8_t>(BarField::OpenHighLow) | static_cast<uint8_t>(BarField::Volume)};
  }
  bool has(BarField field) const { return (mask & static_cast<uint8_t>(field)) != 0; }
  void add(BarField field) { mask |= static_cast<uint8_t>(field); }
  bool covers(BarFields needed) const { return (mask & needed.mask) == needed.mask; }
  bool operator==(const BarFields&) const = default;
};

// The inputs qtft computes rather than reads from a declared column: each one a producer
// with the name the model file saves it under. Observed ones read the bar and the one
// before; known ones (the calendar) read the bar's timestamp alone, so that a forecast can
// compute them for bars that have not happened yet.
enum class DerivedInput : uint8_t {
  LogReturn,   // log(close / previous close)
  HlRange,     // log(high / low)
  CloseOpen,   // log(close / open)
  LogVolume,   // log(1 + volume)
  BarGap,      // log(1 + minutes since the previous bar): session and weekend gaps
  PastTarget,  // the transformed target at the bar ("target"), when it is not log_return
  TimeOfDaySin,
  TimeOfDayCos,
  DayOfWeekSin,
  DayOfWeekCos,
  DayOfMonthSin,
  DayOfMonthCos,
  MonthOfYearSin,
  MonthOfYearCos,
};
const char* derived_input_name(DerivedInput input);  // "log_return", "time_of_day_sin", ...
std::optional<DerivedInput> derived_input_named(std::string_view name);
bool is_calendar_input(DerivedInput input);
BarFields fields_read_by(DerivedInput input);  // hl_range needs open/high/low, ...

// The calendar's cyclic terms, each a sin/cos pair on the clock of the calendar's zone.
enum class CalendarTerm : uint8_t { TimeOfDay, DayOfWeek, DayOfMonth, MonthOfYear };
const char* calendar_term_name(CalendarTerm term);  // "time-of-day", as --calendar names it
// A --calendar list ("time-of-day,day-of-week", or "none"): throws UsageError naming `flag`,
// the value and the choices for a name it does not know, or a term named twice.
std::vector<CalendarTerm> parse_calendar(const std::string& list, const std::string& flag);

// The calendar terms that vary at bars `typical_gap_ns` apart: time of day and day of week
// for intraday bars (what qtft always computed), day of week, day of month and month of year
// for daily bars (no time of day: daily bars share one), day of month and month of year for
// weekly bars, month of year beyond.
std::vector<CalendarTerm> calendar_for_spacing(int64_t typical_gap_ns);

// The typical spacing of a source's bars, by counting every gap between consecutive bars
// of a series into the classes calendar_for_spacing tells apart: the counts do not depend
// on the order the series or their parts arrive in, so the feature store's parts and a
// whole file in memory choose the same calendar.
class BarSpacing {
 public:
  // `timestamps_ns` continue a series whose previous bar was at `previous_ns` (none: a
  // series' first part).
  void add(std::span<const int64_t> timestamps_ns, std::optional<int64_t> previous_ns = std::nullopt);
  // The calendar of the median gap's class; intraday's when there is no gap at all.
  std::vector<CalendarTerm> calendar() const;

 private:
  int64_t counts_[4] = {0, 0, 0, 0};
};

// The derived inputs of one model, by kind, in the order its rows hold them.
struct DerivedInputs {
  std::vector<DerivedInput> observed;
  std::vector<DerivedInput> known;
  BarFields fields_read() const;  // the bar columns they need
  bool operator==(const DerivedInputs&) const = default;
};
// A new model's: every observed input `fields` allow, the target's past when it is not the
// log return of the close (`past_target`), and the calendar's terms.
DerivedInputs derived_inputs_for(BarFields fields, bool past_target, std::span<const CalendarTerm> calendar);
// The calendar terms among `known` (each pair once, in order).
std::vector<CalendarTerm> calendar_of(const DerivedInputs& inputs);
std::vector<std::string> names_of(const std::vector<DerivedInput>& inputs);

}  // namespace qtft::data
