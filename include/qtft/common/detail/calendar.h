#pragma once

#include <cstdint>

namespace qtft {

inline constexpr int64_t kNanosPerSecond = 1'000'000'000;
inline constexpr int64_t kSecondsPerDay = 86'400;

// Seconds since UTC midnight, in [0, 86400).
int64_t seconds_of_day(int64_t timestamp_ns);

// 0 = Monday ... 6 = Sunday, in UTC.
int day_of_week(int64_t timestamp_ns);

// The UTC date of a timestamp: month 1-12, day 1-31, and the days its month has.
struct CivilDate {
  int year = 1970;
  int month = 1, day = 1, days_in_month = 31;
};
CivilDate civil_date(int64_t timestamp_ns);

}  // namespace qtft
