#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace qtft::data {

// Wall-clock time of an exchange, from the tz database (Arrow's local_timestamp over the
// system zoneinfo), so that a session open stays at one time of day across daylight-saving
// changes. An empty zone is UTC: calendar terms as qtft computed them before zones existed.

// Whether `zone` is a name the tz database knows ("America/Chicago", "UTC").
bool is_time_zone(const std::string& zone);

// Each UTC timestamp as nanoseconds since 1970-01-01 00:00 on `zone`'s clock (the instant's
// local date and time read as if UTC), into `out`. Throws qtft::Error naming the zone when
// the tz database does not know it.
void local_wall_clock(std::span<const int64_t> utc_ns, const std::string& zone, std::vector<int64_t>& out);

}  // namespace qtft::data
