#include "qtft/data/features/batch.h"

#include <ATen/ops/empty.h>

#include <algorithm>
#include <string>

#include "qtft/common/error.h"

namespace qtft::data {

Batch empty_batch(const BatchShape& s) {
  Batch batch;
  batch.observed = at::empty({s.windows, s.encoder_length, s.observed}, at::kFloat);
  batch.known = at::empty({s.windows, s.encoder_length + s.horizon, s.known}, at::kFloat);
  batch.symbol = at::empty({s.windows}, at::kLong);
  batch.statics = at::empty({s.windows, s.statics}, at::kFloat);
  if (s.with_target) batch.target = at::empty({s.windows, s.horizon}, at::kFloat);
  return batch;
}

void fill_window(Batch& batch, const BatchShape& s, int64_t i, const WindowRows& rows, const RowCopy& copy) {
  const int64_t l = s.encoder_length, h = s.horizon;
  auto require = [&](const char* what, size_t given, int64_t need) {
    if (given != static_cast<size_t>(need)) {
      throw Error(std::string("batch window ") + std::to_string(i) + ": " + what + " holds " + std::to_string(given) +
                  " values, the batch's shape needs " + std::to_string(need));
    }
  };
  require("observed", rows.observed.size(), l * s.observed);
  require("known", rows.known.size() + rows.known_ahead.size(), (l + h) * s.known);
  require("statics", rows.statics.size(), s.statics);
  if (s.with_target) require("target", rows.target.size(), h);
  auto put = [&](std::span<const float> from, float* to) {
    if (from.empty()) return;
    if (copy) {
      copy(from, to);
    } else {
      std::copy(from.begin(), from.end(), to);
    }
  };
  float* known = batch.known.data_ptr<float>() + i * (l + h) * s.known;
  put(rows.observed, batch.observed.data_ptr<float>() + i * l * s.observed);
  put(rows.known, known);
  put(rows.known_ahead, known + rows.known.size());
  put(rows.statics, batch.statics.data_ptr<float>() + i * s.statics);
  if (s.with_target) put(rows.target, batch.target.data_ptr<float>() + i * h);
  batch.symbol.data_ptr<int64_t>()[i] = rows.symbol_id;
}

Batch make_batch(const Dataset& dataset, Split split, std::span<const size_t> indices) {
  const auto& o = dataset.options();
  const BatchShape shape{static_cast<int64_t>(indices.size()),
                         o.encoder_length,
                         o.horizon,
                         static_cast<int64_t>(dataset.num_observed()),
                         static_cast<int64_t>(dataset.num_known()),
                         static_cast<int64_t>(dataset.num_static())};
  Batch batch = empty_batch(shape);
  const RowCopy copy = [&dataset](std::span<const float> from, float* to) { dataset.copy(from, to); };
  const int64_t l = shape.encoder_length, h = shape.horizon;
  batch.windows.reserve(indices.size());
  for (int64_t i = 0; i < shape.windows; ++i) {
    WindowRef w = dataset.window(split, indices[static_cast<size_t>(i)]);
    batch.windows.push_back(w);
    const auto& s = dataset.series()[w.series];
    // Rows are contiguous in the per-series matrices, so each input is one copy.
    auto part = [](std::span<const float> values, int64_t first, int64_t count) {
      return values.subspan(static_cast<size_t>(first), static_cast<size_t>(count));
    };
    WindowRows rows;
    rows.observed = part(s.observed, w.start * shape.observed, l * shape.observed);
    rows.known = part(s.known, w.start * shape.known, (l + h) * shape.known);
    rows.target = part(s.target, w.start + l, h);
    rows.statics = s.statics.first(static_cast<size_t>(shape.statics));
    rows.symbol_id = s.symbol_id;
    fill_window(batch, shape, i, rows, copy);
  }
  return batch;
}

}  // namespace qtft::data
