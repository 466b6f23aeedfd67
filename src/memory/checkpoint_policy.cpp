#include "qtft/memory/checkpoint_policy.h"

#include <cctype>
#include <limits>

#include "qtft/common/error.h"

namespace qtft::memory {
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
    {"m", kKiB * kKiB},
    {"mib", kKiB * kKiB},
    {"mb", kKB * kKB},
    {"g", kKiB * kKiB * kKiB},
    {"gib", kKiB * kKiB * kKiB},
    {"gb", kKB * kKB * kKB},
    {"t", kKiB * kKiB * kKiB * kKiB},
    {"tib", kKiB * kKiB * kKiB * kKiB},
    {"tb", kKB * kKB * kKB * kKB},
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

CheckpointPolicy parse_checkpoint_policy(const std::string& name) {
  if (name == "none") return CheckpointPolicy::None;
  if (name == "blocks") return CheckpointPolicy::Blocks;
  if (name == "lstm") return CheckpointPolicy::Lstm;
  if (name == "auto") return CheckpointPolicy::Auto;
  throw UsageError("--checkpoint-policy: expected none, blocks, lstm or auto, got \"" + name + "\"");
}

const char* checkpoint_policy_name(CheckpointPolicy policy) {
  switch (policy) {
    case CheckpointPolicy::None: return "none";
    case CheckpointPolicy::Blocks: return "blocks";
    case CheckpointPolicy::Lstm: return "lstm";
    case CheckpointPolicy::Auto: return "auto";
  }
  return "unknown";
}

int64_t parse_byte_size(const std::string& text, const std::string& what) {
  const auto not_a_size = [&] {
    return UsageError(what + ": expected a positive size such as 4GiB, 512MiB, 1.5GB, 800M or 123456, got \"" +
                      text + "\"");
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
  const Wide bytes = whole * static_cast<Wide>(unit->bytes) + fraction * static_cast<Wide>(unit->bytes) / fraction_scale;
  if (bytes > kMax) throw UsageError(what + ": \"" + text + "\" is too large (at most 2^63-1 bytes)");
  if (bytes == 0) throw UsageError(what + ": the size must be positive, got \"" + text + "\"");
  return static_cast<int64_t>(bytes);
}

}  // namespace qtft::memory
