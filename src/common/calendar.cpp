#include "qtft/common/detail/calendar.h"

#include <chrono>

namespace qtft {

int64_t seconds_of_day(int64_t timestamp_ns) {
  int64_t secs = timestamp_ns / kNanosPerSecond;
  if (timestamp_ns < 0 && timestamp_ns % kNanosPerSecond != 0) --secs;
  int64_t r = secs % kSecondsPerDay;
  return r < 0 ? r + kSecondsPerDay : r;
}

int day_of_week(int64_t timestamp_ns) {
  int64_t secs = timestamp_ns / kNanosPerSecond;
  if (timestamp_ns < 0 && timestamp_ns % kNanosPerSecond != 0) --secs;
  int64_t days = secs / kSecondsPerDay;
  if (secs < 0 && secs % kSecondsPerDay != 0) --days;
  // 1970-01-01 was a Thursday (3 with Monday = 0).
  int64_t dow = (days + 3) % 7;
  return static_cast<int>(dow < 0 ? dow + 7 : dow);
}

CivilDate civil_date(int64_t timestamp_ns) {
  using namespace std::chrono;
  const auto day = floor<days>(sys_time<nanoseconds>(nanoseconds(timestamp_ns)));
  const year_month_day date(day);
  const auto last = year_month_day_last(date.year(), month_day_last(date.month()));
  return {static_cast<int>(date.year()), static_cast<int>(static_cast<unsigned>(date.month())),
          static_cast<int>(static_cast<unsigned>(date.day())), static_cast<int>(static_cast<unsigned>(last.day()))};
}

}  // namespace qtft
