#pragma once

// One table of (value, name) pairs per enum, so that parsing a flag, printing a value and
// the error for a wrong name all read the same pairs.

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "qtft/common/error.h"

namespace qtft {

template <class Enum, size_t N>
using EnumNames = std::array<std::pair<Enum, std::string_view>, N>;

// The value's name; "?" for a value the table lacks.
template <class Enum, size_t N>
const char* enum_name(const EnumNames<Enum, N>& names, Enum value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name.data();
  }
  return "?";
}

// "none, plateau or cosine".
template <class Enum, size_t N>
std::string enum_choices(const EnumNames<Enum, N>& names) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += names[i].second;
  }
  return out;
}

// The value named `text`; otherwise throws UsageError "`flag` must be a, b or c, got 'text'".
template <class Enum, size_t N>
Enum parse_enum(const EnumNames<Enum, N>& names, std::string_view text, const std::string& flag) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  throw UsageError(flag + " must be " + enum_choices(names) + ", got '" + std::string(text) + "'");
}

}  // namespace qtft
