#pragma once

#include <cstddef>

#include "qtft/data/dataset.h"
#include "qtft/eval/metrics.h"

namespace qtft::eval {

// The scale and center that take windows [first, first + count) of `split` back to the
// target's units: each window's series' own under per-series normalization, else the pooled.
WindowUnits target_units_of(const data::Dataset& dataset, data::Split split, size_t first, size_t count);

}  // namespace qtft::eval
