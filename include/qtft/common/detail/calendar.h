#pragma once

#include <cstdint>

namespace qtft {

inline constexpr int64_t kNanosPerSecond = 1'000'000'000;
inline constexpr int64_t kSecondsPerDay = 86'400;

// Seconds since UTC midnight, in [0, 86400).
int64_t seconds_of_day(int64_t timestamp_ns);

// 0 = Monday ... 6 = Sunday, in UTC.
int day_of_week(int64_t timestamp_ns);

}  // namespace qtft
