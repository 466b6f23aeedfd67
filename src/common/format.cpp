#include "qtft/common/format.h"

#include <array>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "qtft/common/calendar.h"

namespace qtft {

std::string format_number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  std::array<char, 32> buf{};
  auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  return std::string(buf.data(), end);
}

std::string format_rounded(double value) {
  std::array<char, 32> buf{};
  const int n = std::snprintf(buf.data(), buf.size(), "%g", value);
  return std::string(buf.data(), static_cast<size_t>(n));
}

std::string format_utc(int64_t timestamp_ns) {
  using namespace std::chrono;
  // Floor division so that times before 1970 still land on the right day.
  int64_t days = timestamp_ns / (kSecondsPerDay * kNanosPerSecond);
  if (timestamp_ns < 0 && timestamp_ns % (kSecondsPerDay * kNanosPerSecond) != 0) --days;
  int64_t rest_ns = timestamp_ns - days * kSecondsPerDay * kNanosPerSecond;
  year_month_day ymd{sys_days{std::chrono::days{days}}};
  int64_t secs = rest_ns / kNanosPerSecond;
  int64_t frac = rest_ns % kNanosPerSecond;
  char buf[64];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02lld:%02lld:%02lld", int(ymd.year()),
                        unsigned(ymd.month()), unsigned(ymd.day()),
                        static_cast<long long>(secs / 3600), static_cast<long long>(secs / 60 % 60),
                        static_cast<long long>(secs % 60));
  std::string out(buf, static_cast<size_t>(n));
  if (frac != 0) {
    std::snprintf(buf, sizeof buf, ".%09lld", static_cast<long long>(frac));
    std::string f(buf);
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "Z";
}

std::string format_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string format_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  }
  return buf;
}

}  // namespace qtft
