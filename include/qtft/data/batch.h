#pragma once

#include <ATen/core/Tensor.h>

#include <span>
#include <vector>

#include "qtft/data/dataset.h"

namespace qtft::data {

// A batch of windows as the model consumes it.
struct Batch {
  at::Tensor observed;  // [B, L, observed]      past-only inputs over the encoder
  at::Tensor known;     // [B, L + H, known]     calendar and declared known inputs
  at::Tensor symbol;    // [B] int64             static categorical
  at::Tensor statics;   // [B, S]                declared static inputs ([B, 0] without)
  at::Tensor target;    // [B, H]                scaled future log returns
  std::vector<WindowRef> windows;
  int64_t size() const { return static_cast<int64_t>(windows.size()); }
};

// Gathers the windows at `indices` of `split` into CPU tensors (float32, int64).
Batch make_batch(const Dataset& dataset, Split split, std::span<const size_t> indices);

}  // namespace qtft::data
