#pragma once

// What the training benchmarks share: the configurations they measure and the data.
#include <cstdint>

#include <ATen/CPUGeneratorImpl.h>

#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/synthetic.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/model/tft_options.h"

#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

namespace qtft::bench {

struct TftConfig {
  const char* name;
  int64_t encoder, horizon, hidden, heads, batch;
};

// The TFT paper's electricity configuration, and a small one for quick runs.
inline constexpr TftConfig kPaperConfig{"paper", 168, 24, 160, 4, 64};
inline constexpr TftConfig kSmallConfig{"small", 64, 8, 64, 4, 64};
// Issue 35's configuration W: the paper's sizes at batch 32 with a desk's wide inputs
// (kWideObserved observed and kWideKnown known reals, and the symbol).
inline constexpr TftConfig kWideConfig{"wide", 168, 24, 160, 4, 32};
// NVIDIA's TFT (DeepLearningExamples) on electricity, whose published A100 training rates
// (12,435 items/s in TF32, 17,608 with AMP) issue 49 compares against: hidden 128, 4 heads,
// encoder 168, horizon 24, batch 1024.
inline constexpr TftConfig kNvidiaElectricityConfig{"nvidia-electricity", 168, 24, 128, 4, 1024};
inline constexpr int64_t kWideObserved = 200, kWideKnown = 20;

// The model options of `config` with `observed` and `known` real inputs and one symbol.
inline model::TftOptions wide_options(const TftConfig& config, int64_t observed, int64_t known) {
  model::TftOptions options(observed, known, 1, config.encoder, config.horizon);
  options.hidden_size(config.hidden).attention_heads(config.heads);
  return options;
}

// A batch of `config`'s sizes for wide_options: standard normal inputs and targets, drawn
// from their own generator so that every run measures the same numbers.
inline data::Batch wide_batch(const TftConfig& config, int64_t observed, int64_t known, uint64_t seed = 1) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t b = config.batch, l = config.encoder, h = config.horizon;
  data::Batch batch;
  batch.observed = at::randn({b, l, observed}, generator);
  batch.known = at::randn({b, l + h, known}, generator);
  batch.symbol = at::zeros({b}, at::kLong);
  batch.statics = at::zeros({b, 0});
  batch.target = at::randn({b, h}, generator);
  batch.windows.resize(static_cast<size_t>(b));
  return batch;
}

// The bars of `source` (the embedded synthetic bars by default), windowed for `config`.
inline data::Dataset dataset_for(const TftConfig& config, const data::BarSource& source = {}) {
  const auto bars = data::load_bars(source);
  data::DatasetOptions options;
  options.encoder_length = config.encoder;
  options.horizon = config.horizon;
  return data::Dataset::build(bars, options);
}

}  // namespace qtft::bench
