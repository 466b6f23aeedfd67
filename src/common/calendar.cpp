#include "qtft/common/detail/calendar.h"

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

}  // namespace qtft
