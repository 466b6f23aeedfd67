#pragma once

#include <string>

namespace qtft::data {

// A categorical input's level that a model's vocabulary lacks, met in the rows it reads: the
// level takes the input's unknown entry. Kept so that serving can say so instead of
// forecasting from it silently.
struct UnknownLevel {
  std::string input;  // the column's name
  std::string level;  // the level as the data gives it
  bool operator==(const UnknownLevel&) const = default;
};

}  // namespace qtft::data
