// Calendar inputs on an exchange's clock (--calendar-timezone): time of day and day of week
// read in the zone's local time from the tz database, so that a session open keeps one time
// of day across daylight-saving changes; the zone is saved in the spec and names the store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <numbers>
#include <sstream>

#include "qtft/common/format.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/local_time.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/bars/synthetic.h"
#include "qtft/data/features/dataset_summary.h"
#include "qtft/data/features/detail/features.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/store/feature_store.h"
#include "support/temp_dir.h"
#include "support/tiny_windows.h"

namespace qtft::data {
namespace {

using test::tiny_windows;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kNs = 1'000'000'000;
constexpr int64_t kHour = 3600 * kNs;
// UTC instants: 09:30 in Chicago in winter (CST, UTC-6) and in summer (CDT, UTC-5); the last
// minute before and the first after the spring change (2026-03-08 02:00 CST -> 03:00 CDT);
// and a Friday 03:00 UTC that is still Thursday evening in Chicago.
constexpr int64_t kWinterOpen = 1768491000 * kNs;    // 2026-01-15 15:30 UTC
constexpr int64_t kSummerOpen = 1784125800 * kNs;    // 2026-07-15 14:30 UTC
constexpr int64_t kBeforeSpring = 1772956740 * kNs;  // 2026-03-08 07:59 UTC
constexpr int64_t kAfterSpring = 1772956800 * kNs;   // 2026-03-08 08:00 UTC
constexpr int64_t kFridayUtc = 1768532400 * kNs;     // 2026-01-16 03:00 UTC

TEST(LocalWallClock, FollowsTheZonesOffsetThroughDaylightSaving) {
  const std::vector<int64_t> utc{kWinterOpen, kSummerOpen, kBeforeSpring, kAfterSpring};
  std::vector<int64_t> local;
  local_wall_clock(utc, "America/Chicago", local);
  EXPECT_THAT(local, ElementsAre(kWinterOpen - 6 * kHour, kSummerOpen - 5 * kHour, kBeforeSpring - 6 * kHour,
                                 kAfterSpring - 5 * kHour));
  local_wall_clock(utc, "", local);
  EXPECT_EQ(local, utc);  // no zone: UTC, as before zones existed
  local_wall_clock({}, "America/Chicago", local);
  EXPECT_TRUE(local.empty());

  EXPECT_TRUE(is_time_zone("America/Chicago"));
  EXPECT_TRUE(is_time_zone("UTC"));
  EXPECT_FALSE(is_time_zone("Mars/Olympus_Mons"));
  EXPECT_FALSE(is_time_zone(""));
  EXPECT_THAT(test::error_message([&] { local_wall_clock(utc, "Mars/Olympus_Mons", local); }),
              HasSubstr("calendar time zone 'Mars/Olympus_Mons' is not in the tz database"));
}

// A spec whose known inputs are the calendar's, unnormalized, so its values are the terms.
InputSchema calendar_spec(const std::string& zone) {
  InputSchema spec;
  spec.derived.known = derived_inputs_for({}, false, calendar_for_spacing(0)).known;
  for (DerivedInput input : spec.derived.known) spec.known.push_back({derived_input_name(input), 0.0, 1.0});
  spec.declared.calendar_timezone = zone;
  return spec;
}

TEST(CalendarInputs, ASessionOpenKeepsItsTimeOfDayAndItsLocalWeekday) {
  const std::vector<int64_t> at{kWinterOpen, kSummerOpen, kFridayUtc};
  const auto chicago = known_inputs_at(at, calendar_spec("America/Chicago"));
  ASSERT_EQ(chicago.size(), 3u * 4u);
  const double open_phase = 2.0 * std::numbers::pi * 9.5 / 24.0;
  for (int bar : {0, 1}) {
    EXPECT_EQ(chicago[4 * bar + 0], static_cast<float>(std::sin(open_phase))) << bar;
    EXPECT_EQ(chicago[4 * bar + 1], static_cast<float>(std::cos(open_phase))) << bar;
  }
  // 21:00 on Thursday (3, Monday = 0) in Chicago; 03:00 on Friday in UTC.
  const double thursday = 2.0 * std::numbers::pi * 3.0 / 7.0;
  EXPECT_EQ(chicago[8 + 1], static_cast<float>(std::cos(2.0 * std::numbers::pi * 21.0 / 24.0)));
  EXPECT_EQ(chicago[8 + 2], static_cast<float>(std::sin(thursday)));
  const auto utc = known_inputs_at(at, calendar_spec(""));
  EXPECT_NE(utc[0], utc[4]);  // in UTC the open moves by an hour
  EXPECT_EQ(utc[8 + 2], static_cast<float>(std::sin(2.0 * std::numbers::pi * 4.0 / 7.0)));
}

// One symbol of 30 hourly bars across the spring change.
std::string hourly_csv() {
  std::ostringstream out;
  out << "timestamp,close\n";
  for (int i = 0; i < 30; ++i) out << format_utc(kBeforeSpring - 12 * kHour + i * kHour) << "," << 100 + i % 3 << "\n";
  return out.str();
}

BarSource in_zone(const std::string& file, const std::string& zone) {
  BarSource source;
  source.csv_file = file;
  source.read.inputs.calendar_timezone = zone;
  return source;
}

TEST(CalendarInputs, TheZoneIsSavedInTheSpecAndAModelReadsItsOwn) {
  test::TempDir dir;
  const auto file = dir.write("h.csv", hourly_csv());
  const auto chicago = Dataset::build(load_bars(in_zone(file, "America/Chicago")), tiny_windows());
  const auto& spec = chicago.schema();
  EXPECT_EQ(spec.calendar_timezone(), "America/Chicago");
  const auto json = to_json(spec);
  EXPECT_EQ(json.at("calendar_timezone"), "America/Chicago");
  EXPECT_EQ(input_schema_from_json(json).calendar_timezone(), "America/Chicago");
  EXPECT_FALSE(
      to_json(Dataset::build(load_bars(in_zone(file, "")), tiny_windows()).schema()).contains("calendar_timezone"));
  EXPECT_THAT(summarize_dataset(chicago), HasSubstr("calendar: time-of-day, day-of-week in America/Chicago\n"));

  // Each row's calendar terms are those of its bar on Chicago's clock.
  const auto& series = chicago.series().front();
  for (size_t r = 0; r < series.rows(); ++r) {
    const std::vector<int64_t> at{series.timestamp_ns[r]};
    const auto expected = known_inputs_at(at, spec);
    for (size_t k = 0; k < 4; ++k) EXPECT_EQ(series.known[4 * r + k], expected[k]) << r;
  }

  // A model reads bars on its own calendar, whatever the source says; bars read on another
  // clock are refused.
  const auto applied = open_dataset(in_zone(file, ""), tiny_windows(), &spec);
  EXPECT_EQ(applied.schema().calendar_timezone(), "America/Chicago");
  EXPECT_EQ(applied.series().front().known[0], series.known[0]);
  EXPECT_EQ(test::error_message([&] { Dataset::build(load_bars(in_zone(file, "")), tiny_windows(), spec); }),
            file +
                ": the model's calendar is in America/Chicago but the bars were read for UTC (no "
                "--calendar-timezone)");
}

TEST(CalendarInputs, TheZoneNamesTheFeatureStore) {
  test::TempDir dir;
  SyntheticOptions synthetic;
  synthetic.rows = 2'000;
  synthetic.symbols = 1;
  BarSource source;
  source.parquet_file = dir.file("bars");
  write_parquet_partitions(generate_synthetic_bars(synthetic), source.parquet_file);
  DatasetOptions windows;
  windows.encoder_length = 8;
  windows.horizon = 2;
  const auto utc = prepare_feature_store(source, windows, nullptr);
  source.read.inputs.calendar_timezone = "America/Chicago";
  const auto chicago = prepare_feature_store(source, windows, nullptr);
  EXPECT_TRUE(chicago.built);
  EXPECT_NE(chicago.path, utc.path);
  EXPECT_FALSE(prepare_feature_store(source, windows, nullptr).built);
  EXPECT_EQ(map_feature_store(chicago.path, windows).schema().calendar_timezone(), "America/Chicago");
}

TEST(CalendarInputs, AnUnknownZoneNamesTheSourceAndTheFlag) {
  test::TempDir dir;
  const auto file = dir.write("h.csv", hourly_csv());
  EXPECT_EQ(test::error_message([&] { load_bars(in_zone(file, "Mars/Olympus_Mons")); }),
            file +
                ": --calendar-timezone zone 'Mars/Olympus_Mons' is not in the tz database (a name such as "
                "America/Chicago)");
  BarSource embedded;
  embedded.read.inputs.calendar_timezone = "Mars/Olympus_Mons";
  EXPECT_THAT(test::error_message([&] { load_bars(embedded); }), HasSubstr("'Mars/Olympus_Mons'"));
  // The embedded data takes a zone: it declares no column.
  embedded.read.inputs.calendar_timezone = "Europe/London";
  embedded.synthetic.rows = 500;
  EXPECT_EQ(load_bars(embedded).declared.calendar_timezone, "Europe/London");
}

}  // namespace
}  // namespace qtft::data
