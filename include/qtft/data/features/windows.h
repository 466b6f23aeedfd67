#pragma once

// How a series' rows divide into splits and windows.
#include <array>
#include <cstdint>

namespace qtft::data {

// All: every window of every series, across the splits' bounds too (a deployed model scored
// on a file of new bars: `evaluate --split all`). kAllSplits are the three the model's
// training divides the rows into.
enum class Split { Train = 0, Validation = 1, Test = 2, All = 3 };
inline constexpr std::array<Split, 3> kAllSplits{Split::Train, Split::Validation, Split::Test};
const char* split_name(Split split);

struct DatasetOptions {
  int64_t encoder_length = 64;
  int64_t horizon = 8;
  // Chronological per symbol: the first (1 - validation - test) of each symbol's rows
  // train, the next `validation_fraction` validate, the last `test_fraction` test.
  double validation_fraction = 0.15;
  double test_fraction = 0.15;
  void validate() const;  // throws UsageError naming the flag
};
// Rows [bounds[k], bounds[k+1]) of a series of `rows` rows form split k under `options`.
std::array<int64_t, 4> split_bounds(int64_t rows, const DatasetOptions& options);

// A window: encoder rows [start, start + L), decoder rows [start + L, start + L + H).
struct WindowRef {
  uint32_t series = 0;
  uint32_t start = 0;
};

}  // namespace qtft::data
