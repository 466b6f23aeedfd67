#include "qtft/data/batch.h"

#include <ATen/ops/empty.h>

#include <algorithm>

namespace qtft::data {

Batch make_batch(const Dataset& dataset, Split split, std::span<const size_t> indices) {
  const auto& o = dataset.options();
  const int64_t b = static_cast<int64_t>(indices.size());
  const int64_t l = o.encoder_length, h = o.horizon;
  const auto n_obs = static_cast<int64_t>(dataset.num_observed());
  const auto n_known = static_cast<int64_t>(dataset.num_known());
  const auto n_static = static_cast<int64_t>(dataset.num_static());

  Batch batch;
  batch.observed = at::empty({b, l, n_obs}, at::kFloat);
  batch.known = at::empty({b, l + h, n_known}, at::kFloat);
  batch.symbol = at::empty({b}, at::kLong);
  batch.target = at::empty({b, h}, at::kFloat);
  batch.statics = at::empty({b, n_static}, at::kFloat);
  float* observed = batch.observed.data_ptr<float>();
  float* known = batch.known.data_ptr<float>();
  int64_t* symbol = batch.symbol.data_ptr<int64_t>();
  float* target = batch.target.data_ptr<float>();
  float* statics = batch.statics.data_ptr<float>();

  batch.windows.reserve(indices.size());
  for (int64_t i = 0; i < b; ++i) {
    WindowRef w = dataset.window(split, indices[static_cast<size_t>(i)]);
    batch.windows.push_back(w);
    const auto& s = dataset.series()[w.series];
    // Rows are contiguous in the per-series matrices, so each input is one copy.
    auto part = [](std::span<const float> values, int64_t first, int64_t count) {
      return values.subspan(static_cast<size_t>(first), static_cast<size_t>(count));
    };
    dataset.copy(part(s.observed, w.start * n_obs, l * n_obs), observed + i * l * n_obs);
    dataset.copy(part(s.known, w.start * n_known, (l + h) * n_known), known + i * (l + h) * n_known);
    dataset.copy(part(s.target, w.start + l, h), target + i * h);
    symbol[i] = s.symbol_id;
    if (n_static > 0) dataset.copy(s.statics.first(static_cast<size_t>(n_static)), statics + i * n_static);
  }
  return batch;
}

}  // namespace qtft::data
