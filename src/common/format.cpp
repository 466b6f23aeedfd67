#include "qtft/common/format.h"

#include <array>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/error.h"

namespace qtft {
namespace {

struct Unit {
  const char* suffix;  // lower case; matched case-insensitively
  int64_t bytes;
};

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kKB = 1000;

constexpr Unit kUnits[] = {
    {"", 1},
    {"b", 1},
    {"k", kKiB},
    {"kib", kKiB},
    {"kb", kKB},
    {"m", kKiB* kKiB},
    {"mib", kKiB* kKiB},
    {"mb", kKB* kKB},
    {"g", kKiB* kKiB* kKiB},
    {"gib", kKiB* kKiB* kKiB},
    {"gb", kKB* kKB* kKB},
    {"t", kKiB* kKiB* kKiB* kKiB},
    {"tib", kKiB* kKiB* kKiB* kKiB},
    {"tb", kKB* kKB* kKB* kKB},
};

// Beyond this many fraction digits the rest cannot change the result by a whole byte (the
// largest unit is about 1.1e12 bytes), and more would overflow the exact arithmetic below.
constexpr size_t kMaxFractionDigits = 18;

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

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
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02lld:%02lld:%02lld", int(ymd.year()), unsigned(ymd.month()),
                        unsigned(ymd.day()), static_cast<long long>(secs / 3600),
                        static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
  std::string out(buf, static_cast<size_t>(n));
  if (frac != 0) {
    std::snprintf(buf, sizeof buf, ".%09lld", static_cast<long long>(frac));
    std::string f(buf);
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "Z";
}

int64_t parse_utc(const std::string& text, const std::string& what) {
  using namespace std::chrono;
  int y = 0, h = 0, mi = 0, sec = 0, used = 0;
  unsigned mo = 0, d = 0;
  const auto bad = [&] {
    return UsageError(what + " " + text +
                      ": not a UTC date or time (2024-01-02, 2024-01-02T08:30, 2024-01-02T08:30:15Z)");
  };
  if (std::sscanf(text.c_str(), "%4d-%2u-%2u%n", &y, &mo, &d, &used) != 3 || used != 10) throw bad();
  std::string rest = text.substr(10);
  if (!rest.empty() && (rest[0] == 'T' || rest[0] == ' ')) {
    int n = 0;
    if (std::sscanf(rest.c_str() + 1, "%2d:%2d%n", &h, &mi, &n) != 2 || n != 5) throw bad();
    rest = rest.substr(6);
    if (!rest.empty() && rest[0] == ':') {
      if (std::sscanf(rest.c_str() + 1, "%2d%n", &sec, &n) != 1 || n != 2) throw bad();
      rest = rest.substr(3);
    }
  }
  if (rest == "Z") rest.clear();
  const year_month_day ymd{year{y}, month{mo}, day{d}};
  if (!rest.empty() || !ymd.ok() || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59) throw bad();
  const int64_t days = sys_days{ymd}.time_since_epoch().count();
  return ((days * 24 + h) * 60 + mi) * 60 * kNanosPerSecond + sec * kNanosPerSecond;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
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

int64_t parse_byte_size(const std::string& text, const std::string& what) {
  const auto not_a_size = [&] {
    return UsageError(what + ": expected a positive size such as 4GiB, 512MiB, 1.5GB, 800M or 123456, got \"" + text +
                      "\"");
  };
  // Exact integer arithmetic rather than a double, so that "1.5GB" is 1500000000 and not
  // one byte off, and so that overflow is caught instead of wrapping.
  using Wide = unsigned __int128;
  constexpr Wide kMax = std::numeric_limits<int64_t>::max();

  size_t i = 0;
  Wide whole = 0;
  const size_t whole_begin = i;
  for (; i < text.size() && is_digit(text[i]); ++i) {
    whole = whole * 10 + static_cast<Wide>(text[i] - '0');
    if (whole > kMax) throw UsageError(what + ": \"" + text + "\" is too large (at most 2^63-1 bytes)");
  }
  if (i == whole_begin) throw not_a_size();

  Wide fraction = 0;
  Wide fraction_scale = 1;
  if (i < text.size() && text[i] == '.') {
    const size_t fraction_begin = ++i;
    for (; i < text.size() && is_digit(text[i]); ++i) {
      if (i - fraction_begin < kMaxFractionDigits) {
        fraction = fraction * 10 + static_cast<Wide>(text[i] - '0');
        fraction_scale *= 10;
      }
    }
    if (i == fraction_begin) throw not_a_size();  // "1." or "1.G"
  }

  const std::string suffix = lower(text.substr(i));
  const Unit* unit = nullptr;
  for (const Unit& u : kUnits) {
    if (suffix == u.suffix) unit = &u;
  }
  if (unit == nullptr) throw not_a_size();

  // Fractions of a byte are dropped ("0.1K" is 102 bytes).
  const Wide bytes =
      whole * static_cast<Wide>(unit->bytes) + fraction * static_cast<Wide>(unit->bytes) / fraction_scale;
  if (bytes > kMax) throw UsageError(what + ": \"" + text + "\" is too large (at most 2^63-1 bytes)");
  if (bytes == 0) throw UsageError(what + ": the size must be positive, got \"" + text + "\"");
  return static_cast<int64_t>(bytes);
}

}  // namespace qtft
