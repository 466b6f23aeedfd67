// The calendar inputs follow the bars' spacing: daily bars get no time of day (a constant
// that `explain` once gave most of the decoder's weight) but day of week, day of month and
// month of year; a declaration names its own (--calendar, "calendar" in a declaration file);
// a model keeps the calendar it was trained on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/features/detail/features.h"
#include "qtft/data/store/feature_store.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"
#include "support/tiny_windows.h"

namespace qtft::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using enum CalendarTerm;

constexpr int64_t kMinuteNs = 60LL * 1'000'000'000;
constexpr int64_t kDayNs = 1440 * kMinuteNs;
constexpr int64_t kMonday = 1704067200LL * 1'000'000'000;  // 2024-01-01T00:00:00Z, a Monday

std::vector<std::string> known_names(const InputSchema& spec) {
  std::vector<std::string> names;
  for (const auto& f : spec.known) names.push_back(f.name);
  return names;
}

// `n` daily bars on weekdays only, as an index's closes are stamped.
BarSet weekday_bars(int n, int symbols = 1) {
  BarSet bars = test::regular_bar_set(n, symbols);
  for (auto& s : bars.series) {
    int64_t t = kMonday;
    for (auto& stamp : s.timestamp_ns) {
      stamp = t;
      t += kDayNs;
      if (day_of_week(t) == 5) t += 2 * kDayNs;  // Saturday: on to Monday
    }
  }
  return bars;
}

TEST(CalendarTerms, EachSpacingGetsTheTermsThatVaryAtIt) {
  EXPECT_THAT(calendar_for_spacing(5 * kMinuteNs), ElementsAre(TimeOfDay, DayOfWeek));
  EXPECT_THAT(calendar_for_spacing(23 * 60 * kMinuteNs), ElementsAre(DayOfWeek, DayOfMonth, MonthOfYear));
  EXPECT_THAT(calendar_for_spacing(kDayNs), ElementsAre(DayOfWeek, DayOfMonth, MonthOfYear));
  EXPECT_THAT(calendar_for_spacing(7 * kDayNs), ElementsAre(DayOfMonth, MonthOfYear));
  EXPECT_THAT(calendar_for_spacing(31 * kDayNs), ElementsAre(MonthOfYear));
}

TEST(CalendarTerms, TheMedianGapChoosesWhateverTheWeekendsAndNights) {
  BarSpacing daily;
  daily.add(weekday_bars(60).series[0].timestamp_ns);  // gaps of 1 day, and 3 over weekends
  EXPECT_THAT(daily.calendar(), ElementsAre(DayOfWeek, DayOfMonth, MonthOfYear));
  BarSpacing intraday;  // 5-minute bars of an 8-hour session, 16 hours apart
  std::vector<int64_t> session;
  for (int day = 0; day < 5; ++day)
    for (int i = 0; i < 96; ++i) session.push_back(kMonday + day * kDayNs + i * 5 * kMinuteNs);
  intraday.add(session);
  EXPECT_THAT(intraday.calendar(), ElementsAre(TimeOfDay, DayOfWeek));
  EXPECT_THAT(BarSpacing().calendar(), ElementsAre(TimeOfDay, DayOfWeek));  // no gap: today's calendar
}

TEST(CalendarTerms, AGapAcrossPartsCountsAsInAWholeSeries) {
  // Gaps of an hour, a day and a day: the median is a day's.
  const std::vector<int64_t> t{0, 60 * kMinuteNs, 60 * kMinuteNs + kDayNs, 60 * kMinuteNs + 2 * kDayNs};
  BarSpacing whole, parts, parts_unjoined;
  whole.add(t);
  parts.add(std::span(t).first(2));
  parts.add(std::span(t).subspan(2), t[1]);
  parts_unjoined.add(std::span(t).first(2));
  parts_unjoined.add(std::span(t).subspan(2));
  EXPECT_EQ(parts.calendar(), whole.calendar());
  EXPECT_THAT(whole.calendar(), ElementsAre(DayOfWeek, DayOfMonth, MonthOfYear));
  // Without the gap between the parts, an hour and a day: the lower median, intraday.
  EXPECT_THAT(parts_unjoined.calendar(), ElementsAre(TimeOfDay, DayOfWeek));
}

TEST(CalendarTerms, DayOfMonthAndMonthOfYearByHand) {
  BarSeries s;
  s.symbol = "DAX";
  // 2024-02-29 (a leap day, day 29 of 29) and 2024-03-16 (day 16 of 31), at noon UTC.
  s.timestamp_ns = {1709208000LL * 1'000'000'000, 1710590400LL * 1'000'000'000};
  s.close = {100, 101};
  const auto derived = derived_inputs_for({}, false, std::vector{DayOfMonth, MonthOfYear});
  EXPECT_THAT(names_of(derived.known),
              ElementsAre("day_of_month_sin", "day_of_month_cos", "month_of_year_sin", "month_of_year_cos"));
  const auto f = compute_raw_features(s, derived, "");
  ASSERT_EQ(f.known.size(), 4u);  // one row: the second bar's
  const double two_pi = 2 * std::numbers::pi;
  EXPECT_DOUBLE_EQ(f.known[0], std::sin(two_pi * 15 / 31));
  EXPECT_DOUBLE_EQ(f.known[1], std::cos(two_pi * 15 / 31));
  EXPECT_DOUBLE_EQ(f.known[2], std::sin(two_pi * 2 / 12));
  EXPECT_DOUBLE_EQ(f.known[3], std::cos(two_pi * 2 / 12));
  const auto leap = known_inputs_at(std::vector<int64_t>{s.timestamp_ns[0]}, [&] {
    InputSchema spec;
    spec.derived.known = derived.known;
    for (DerivedInput input : derived.known) spec.known.push_back({derived_input_name(input), 0.0, 1.0});
    return spec;
  }());
  EXPECT_FLOAT_EQ(leap[0], static_cast<float>(std::sin(two_pi * 28 / 29)));
  EXPECT_FLOAT_EQ(leap[2], static_cast<float>(std::sin(two_pi * 1 / 12)));
}

TEST(CalendarTerms, DailyBarsGetNoTimeOfDayAndADeclarationNamesItsOwn) {
  const BarSet daily = weekday_bars(120, 2);
  const auto fitted = Dataset::build(daily, test::tiny_windows());
  EXPECT_THAT(known_names(fitted.schema()), ElementsAre("day_of_week_sin", "day_of_week_cos", "day_of_month_sin",
                                                        "day_of_month_cos", "month_of_year_sin", "month_of_year_cos"));
  BarSet declared = daily;
  declared.declared.calendar = std::vector{TimeOfDay};
  const auto named = Dataset::build(declared, test::tiny_windows());
  EXPECT_THAT(known_names(named.schema()), ElementsAre("time_of_day_sin", "time_of_day_cos"));
  BarSet no_calendar = daily;
  no_calendar.declared.calendar = std::vector<CalendarTerm>{};
  EXPECT_EQ(test::error_message([&] { Dataset::build(no_calendar, test::tiny_windows()); }),
            "test bars: --calendar none leaves the decoder no input: keep a calendar term or declare a known column "
            "(--known, --known-categorical)");
  // Intraday bars keep the calendar every model had.
  EXPECT_THAT(known_names(Dataset::build(test::regular_bar_set(120, 1), test::tiny_windows()).schema()),
              ElementsAre("time_of_day_sin", "time_of_day_cos", "day_of_week_sin", "day_of_week_cos"));

  // A model reads its own calendar whatever the bars' spacing, and refuses another one named.
  const auto applied = Dataset::build(test::regular_bar_set(120, 2), test::tiny_windows(), fitted.schema());
  EXPECT_EQ(known_names(applied.schema()), known_names(fitted.schema()));
  EXPECT_EQ(test::error_message([&] { Dataset::build(declared, test::tiny_windows(), fitted.schema()); }),
            "test bars: the model's calendar is day-of-week,day-of-month,month-of-year but the bars were read for "
            "the calendar time-of-day (--calendar, or an --inputs file's \"calendar\")");
  // The same terms in another order are the model's calendar.
  BarSet reordered = daily;
  reordered.declared.calendar = std::vector{MonthOfYear, DayOfWeek, DayOfMonth};
  EXPECT_EQ(known_names(Dataset::build(reordered, test::tiny_windows(), fitted.schema()).schema()),
            known_names(fitted.schema()));
}

TEST(CalendarTerms, TheFeatureStoreChoosesAsTheBarsInMemoryDo) {
  test::TempDir dir;
  BarSource source;
  source.parquet_file = dir.file("daily.parquet");
  write_bars_parquet(weekday_bars(300, 2), source.parquet_file);
  source.feature_store = dir.file("store");
  const auto in_memory = Dataset::build(load_bars(source), test::tiny_windows());
  const auto stored = open_dataset(source, test::tiny_windows(), nullptr);
  EXPECT_EQ(known_names(stored.schema()), known_names(in_memory.schema()));
  EXPECT_THAT(known_names(stored.schema()), ::testing::Not(::testing::Contains("time_of_day_sin")));
}

TEST(CalendarTerms, TheFlagAndTheDeclarationFileNameTerms) {
  EXPECT_THAT(parse_calendar("month-of-year,time-of-day", "--calendar"), ElementsAre(MonthOfYear, TimeOfDay));
  EXPECT_THAT(parse_calendar("none", "--calendar"), ElementsAre());
  EXPECT_EQ(test::error_message([] { parse_calendar("hour", "--calendar"); }),
            "--calendar: 'hour' is not a calendar term (choose from none, time-of-day, day-of-week, day-of-month, "
            "month-of-year; a comma list of terms, or none)");
  EXPECT_EQ(test::error_message([] { parse_calendar("day-of-week,day-of-week", "--calendar"); }),
            "--calendar: 'day-of-week' is named twice");
  EXPECT_EQ(test::error_message([] { parse_calendar("none,day-of-week", "--calendar"); }),
            "--calendar: 'none' stands alone, without other terms ('none,day-of-week')");

  test::TempDir dir;
  const auto file = dir.write("inputs.json", R"({"observed": ["f_*"], "calendar": ["day-of-week"]})");
  const auto declaration = read_input_declaration(file);
  ASSERT_TRUE(declaration.calendar.has_value());
  EXPECT_THAT(*declaration.calendar, ElementsAre(DayOfWeek));
  const auto none = read_input_declaration(dir.write("none.json", R"({"calendar": []})"));
  ASSERT_TRUE(none.calendar.has_value());
  EXPECT_TRUE(none.calendar->empty());
  const auto bad = dir.write("bad.json", R"({"calendar": ["hour"]})");
  EXPECT_THAT(test::error_message([&] { read_input_declaration(bad); }),
              HasSubstr(bad + ": 'calendar': 'hour' is not a calendar term"));
  InputDeclaration flags;
  flags.calendar = std::vector{MonthOfYear};
  EXPECT_THAT(test::error_message([&] { append_declaration(flags, declaration); }),
              HasSubstr("--calendar and the declaration file's 'calendar' name different terms"));
}

}  // namespace
}  // namespace qtft::data
