#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <span>
#include <vector>

#include "qtft/data/features/dataset.h"

namespace qtft::data {

// A batch of windows as the model consumes it.
struct Batch {
  at::Tensor observed;  // [B, L, observed]      past-only inputs over the encoder
  at::Tensor known;     // [B, L + H, known]     calendar and declared known inputs
  at::Tensor symbol;    // [B] int64             static categorical
  at::Tensor statics;   // [B, S]                declared static inputs ([B, 0] without)
  at::Tensor target;    // [B, H]                scaled future log returns (undefined for a forecast)
  std::vector<WindowRef> windows;
  int64_t size() const { return static_cast<int64_t>(windows.size()); }
};

// The one layout of a batch, for training's windows and a forecast's alike: `windows` rows
// of `encoder_length` + `horizon` steps, with a target only where the future is known.
struct BatchShape {
  int64_t windows = 0, encoder_length = 0, horizon = 0;
  int64_t observed = 0, known = 0, statics = 0;
  bool with_target = true;
};
// CPU tensors (float32, int64) of that shape, uninitialized; `windows` left empty.
Batch empty_batch(const BatchShape& shape);

// One window's rows as the batch takes them, row-major: the encoder's observed rows; the
// known rows of the encoder and then the decoder, given as `known` with `known_ahead` after
// it (a forecast's decoder rows come from its future timestamps, not from the series); the
// series' statics and id; the decoder's targets when the batch has them.
struct WindowRows {
  std::span<const float> observed, known, known_ahead, statics, target;
  int64_t symbol_id = 0;
};
// How rows are copied in: a plain copy, or the dataset's reader (a mapped feature store).
using RowCopy = std::function<void(std::span<const float> from, float* to)>;
// Writes window `i` of `batch`; throws qtft::Error when the rows do not fill the shape.
void fill_window(Batch& batch, const BatchShape& shape, int64_t i, const WindowRows& rows, const RowCopy& copy = {});

// Gathers the windows at `indices` of `split` into CPU tensors (float32, int64).
Batch make_batch(const Dataset& dataset, Split split, std::span<const size_t> indices);

}  // namespace qtft::data
