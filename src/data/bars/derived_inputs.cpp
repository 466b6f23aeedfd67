#include "qtft/data/bars/derived_inputs.h"

#include <algorithm>
#include <array>
#include <utility>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"

namespace qtft::data {
namespace {

constexpr EnumNames<DerivedInput, 14> kNames{{
    {DerivedInput::LogReturn, "log_return"},
    {DerivedInput::HlRange, "hl_range"},
    {DerivedInput::CloseOpen, "close_open"},
    {DerivedInput::LogVolume, "log_volume"},
    {DerivedInput::BarGap, "bar_gap"},
    {DerivedInput::PastTarget, "target"},
    {DerivedInput::TimeOfDaySin, "time_of_day_sin"},
    {DerivedInput::TimeOfDayCos, "time_of_day_cos"},
    {DerivedInput::DayOfWeekSin, "day_of_week_sin"},
    {DerivedInput::DayOfWeekCos, "day_of_week_cos"},
    {DerivedInput::DayOfMonthSin, "day_of_month_sin"},
    {DerivedInput::DayOfMonthCos, "day_of_month_cos"},
    {DerivedInput::MonthOfYearSin, "month_of_year_sin"},
    {DerivedInput::MonthOfYearCos, "month_of_year_cos"},
}};

constexpr EnumNames<CalendarTerm, 4> kTerms{{
    {CalendarTerm::TimeOfDay, "time-of-day"},
    {CalendarTerm::DayOfWeek, "day-of-week"},
    {CalendarTerm::DayOfMonth, "day-of-month"},
    {CalendarTerm::MonthOfYear, "month-of-year"},
}};

// The sin of each term; its cos follows it in DerivedInput.
DerivedInput sin_of(CalendarTerm term) {
  return static_cast<DerivedInput>(static_cast<int>(DerivedInput::TimeOfDaySin) + 2 * static_cast<int>(term));
}

// The classes of a gap between bars that choose a calendar: intraday (under 20 hours, so
// that daily bars stamped at a local time stay daily across daylight saving), daily (under
// 5 days: a weekend's gap of 3 is a daily bar's), weekly (under 25 days), monthly and beyond.
constexpr int64_t kHourNs = 3600 * kNanosPerSecond;
int spacing_class(int64_t gap_ns) {
  if (gap_ns < 20 * kHourNs) return 0;
  if (gap_ns < 5 * 24 * kHourNs) return 1;
  if (gap_ns < 25 * 24 * kHourNs) return 2;
  return 3;
}

}  // namespace

const char* derived_input_name(DerivedInput input) { return enum_name(kNames, input); }

std::optional<DerivedInput> derived_input_named(std::string_view name) {
  for (const auto& [value, known] : kNames) {
    if (name == known) return value;
  }
  return std::nullopt;
}

bool is_calendar_input(DerivedInput input) { return input >= DerivedInput::TimeOfDaySin; }

BarFields fields_read_by(DerivedInput input) {
  BarFields fields;
  if (input == DerivedInput::HlRange || input == DerivedInput::CloseOpen) fields.add(BarField::OpenHighLow);
  if (input == DerivedInput::LogVolume) fields.add(BarField::Volume);
  return fields;
}

const char* calendar_term_name(CalendarTerm term) { return enum_name(kTerms, term); }

std::vector<CalendarTerm> parse_calendar(const std::string& list, const std::string& flag) {
  std::vector<CalendarTerm> terms;
  if (list == "none") return terms;
  if (list.find("none") != std::string::npos) {
    throw UsageError(flag + ": 'none' stands alone, without other terms ('" + list + "')");
  }
  std::string choices = "none";
  for (const auto& [term, name] : kTerms) choices += ", " + std::string(name);
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const std::string name = list.substr(begin, end - begin);
    const auto it = std::find_if(kTerms.begin(), kTerms.end(), [&](const auto& t) { return name == t.second; });
    if (it == kTerms.end()) {
      throw UsageError(flag + ": '" + name + "' is not a calendar term (choose from " + choices +
                       "; a comma list of terms, or none)");
    }
    if (std::find(terms.begin(), terms.end(), it->first) != terms.end()) {
      throw UsageError(flag + ": '" + name + "' is named twice");
    }
    terms.push_back(it->first);
    begin = end + 1;
  }
  return terms;
}

std::vector<CalendarTerm> calendar_for_spacing(int64_t typical_gap_ns) {
  using enum CalendarTerm;
  switch (spacing_class(typical_gap_ns)) {
    case 0: return {TimeOfDay, DayOfWeek};
    case 1: return {DayOfWeek, DayOfMonth, MonthOfYear};
    case 2: return {DayOfMonth, MonthOfYear};
    default: return {MonthOfYear};
  }
}

void BarSpacing::add(std::span<const int64_t> t, std::optional<int64_t> previous_ns) {
  if (t.empty()) return;
  if (previous_ns) ++counts_[spacing_class(t.front() - *previous_ns)];
  for (size_t i = 1; i < t.size(); ++i) ++counts_[spacing_class(t[i] - t[i - 1])];
}

std::vector<CalendarTerm> BarSpacing::calendar() const {
  int64_t total = 0;
  for (int64_t c : counts_) total += c;
  // The class holding the median gap (the lower median for an even count).
  int64_t below = 0;
  for (int k = 0; k < 4; ++k) {
    below += counts_[k];
    if (2 * below >= total && total > 0) {
      constexpr int64_t kDayNs = 24 * kHourNs;
      constexpr std::array<int64_t, 4> kTypical{kHourNs, kDayNs, 7 * kDayNs, 30 * kDayNs};
      return calendar_for_spacing(kTypical[static_cast<size_t>(k)]);
    }
  }
  return calendar_for_spacing(0);
}

BarFields DerivedInputs::fields_read() const {
  BarFields fields;
  for (const auto* kind : {&observed, &known}) {
    for (DerivedInput input : *kind) fields.mask |= fields_read_by(input).mask;
  }
  return fields;
}

DerivedInputs derived_inputs_for(BarFields fields, bool past_target, std::span<const CalendarTerm> calendar) {
  using enum DerivedInput;
  DerivedInputs out;
  out.observed.push_back(LogReturn);
  if (fields.has(BarField::OpenHighLow)) {
    out.observed.push_back(HlRange);
    out.observed.push_back(CloseOpen);
  }
  if (fields.has(BarField::Volume)) out.observed.push_back(LogVolume);
  out.observed.push_back(BarGap);
  if (past_target) out.observed.push_back(PastTarget);
  for (CalendarTerm term : calendar) {
    out.known.push_back(sin_of(term));
    out.known.push_back(static_cast<DerivedInput>(static_cast<int>(sin_of(term)) + 1));
  }
  return out;
}

std::vector<CalendarTerm> calendar_of(const DerivedInputs& inputs) {
  std::vector<CalendarTerm> terms;
  for (DerivedInput input : inputs.known) {
    if (!is_calendar_input(input)) continue;
    const auto term =
        static_cast<CalendarTerm>((static_cast<int>(input) - static_cast<int>(DerivedInput::TimeOfDaySin)) / 2);
    if (std::find(terms.begin(), terms.end(), term) == terms.end()) terms.push_back(term);
  }
  return terms;
}

std::vector<std::string> names_of(const std::vector<DerivedInput>& inputs) {
  std::vector<std::string> names;
  for (DerivedInput input : inputs) names.emplace_back(derived_input_name(input));
  return names;
}

}  // namespace qtft::data
