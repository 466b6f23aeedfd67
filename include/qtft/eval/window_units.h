#pragma once

#include <cstddef>
#include <span>

#include "qtft/data/features/dataset.h"
#include "qtft/eval/metrics.h"

namespace qtft::eval {

// The scale and center that take windows [first, first + count) of `split` back to the
// target's units: each window's series' own under per-series normalization, else the pooled.
WindowUnits target_units_of(const data::Dataset& dataset, data::Split split, size_t first, size_t count);
// The same for the windows of a batch (their series).
WindowUnits target_units_of(const data::Dataset& dataset, std::span<const data::WindowRef> windows);

}  // namespace qtft::eval
