#pragma once

// The learning-rate range test (`qtft tune --find-lr`, Lightning's lr_find): a short run whose
// learning rate grows geometrically from a small value to a large one, one step at each,
// recording the loss. The loss first barely moves, then falls, then climbs as the rate
// grows too large; the suggested rate is where the smoothed loss falls fastest.

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "qtft/data/bars/bar_source.h"
#include "qtft/data/features/dataset.h"
#include "qtft/model/tft.h"
#include "qtft/train/train_options.h"
#include "qtft/train/workflow.h"

namespace qtft::train {

struct LrRangeOptions {
  double min_learning_rate = 1e-6;
  double max_learning_rate = 1.0;
  int64_t steps = 100;
  // The loss is smoothed as an exponential moving average with this weight on the past
  // (bias-corrected), as Lightning and fastai do: one batch's loss is too noisy to read.
  double smoothing = 0.98;
  // The sweep stops once the smoothed loss exceeds this multiple of its lowest value (or
  // turns non-finite): the rate has grown past any use.
  double divergence = 4.0;
  void validate() const;  // UsageError naming the flag (--find-lr-min, ...)
};

struct LrRangePoint {
  double learning_rate = 0.0;
  double loss = 0.0;      // the step's batch loss
  double smoothed = 0.0;  // the moving average up to it
};

struct LrRangeResult {
  std::vector<LrRangePoint> points;  // one per step taken
  bool diverged = false;             // the loss ran away (LrRangeOptions::divergence): the sweep ended there
  // The rate at the steepest fall of the smoothed loss per log-rate, skipping the first
  // tenth of the steps (at most 10; the average is still warming up) and the last one. NaN
  // when the sweep is too short to tell (fewer than 5 points left).
  double suggested = 0.0;
  int64_t suggested_step = -1;
  double lowest_loss_rate = 0.0;  // where the smoothed loss was lowest (the rate to stay under)
  double seconds = 0.0;
};

// The suggestion for a recorded sweep (LrRangeResult::suggested and suggested_step), from
// the smoothed losses alone: exposed to test it on a known curve.
void suggest_learning_rate(LrRangeResult& result);

// The sweep on a prepared model: `options.steps` steps with Adam (the trainer's, with
// weight decay and clipping from `train`) on the training split's batches in the order
// `train.seed` shuffles them, epoch after epoch if the sweep is longer than one. Dropout
// draws from a stream of `train.seed`; the model's weights are trained by the sweep (pass a
// model made for it). `stop_requested` is polled after every step: the sweep ends there with
// what it recorded.
LrRangeResult lr_range_test(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                            const TrainOptions& train, c10::Device device, const LrRangeOptions& options,
                            const std::function<bool()>& stop_requested = {});

// As `qtft tune --find-lr` runs it: prepares the run `setup` describes (data, model, the QAT
// preamble), as `qtft train` would, and sweeps on it. Nothing is saved.
LrRangeResult find_learning_rate(const data::BarSource& source, const TrainingSetup& setup,
                                 const LrRangeOptions& options, TrainingEvents& events);

nlohmann::json to_json(const LrRangeResult& result, const LrRangeOptions& options);

}  // namespace qtft::train
