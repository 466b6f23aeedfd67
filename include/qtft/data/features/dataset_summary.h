#pragma once

#include <string>

#include "qtft/data/features/dataset.h"

namespace qtft::data {

// A readable multi-line summary: rows and symbols, inputs, windows per split, and the
// normalization statistics fitted on the training split.
std::string summarize_dataset(const Dataset& dataset);

}  // namespace qtft::data
