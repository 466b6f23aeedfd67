// The learning-rate range test: a geometric sweep of the rate, one Adam step at each, and
// the steepest fall of the smoothed loss as the suggestion.
#include "qtft/train/lr_range_test.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/batch_order.h"
#include "qtft/memory/rng_state.h"
#include "qtft/train/fused_adam.h"
#include "qtft/train/train_step.h"

namespace qtft::train {

void LrRangeOptions::validate() const {
  if (!(min_learning_rate > 0) || !std::isfinite(min_learning_rate)) {
    throw UsageError("--find-lr-min " + format_number(min_learning_rate) + ": must be a positive rate");
  }
  if (!(max_learning_rate > min_learning_rate) || !std::isfinite(max_learning_rate)) {
    throw UsageError("--find-lr-max " + format_number(max_learning_rate) + ": must be above --find-lr-min " +
                     format_number(min_learning_rate));
  }
  if (steps < 10) throw UsageError("--find-lr-steps " + std::to_string(steps) + ": at least 10 steps");
  if (!(smoothing >= 0 && smoothing < 1)) {
    throw UsageError("the range test's smoothing " + format_number(smoothing) + ": must lie in [0, 1)");
  }
  if (!(divergence > 1)) {
    throw UsageError("the range test's divergence factor " + format_number(divergence) + ": must exceed 1");
  }
}

void suggest_learning_rate(LrRangeResult& result) {
  const auto& p = result.points;
  result.suggested = NAN;
  result.suggested_step = -1;
  result.lowest_loss_rate = NAN;
  if (p.empty()) return;
  const auto lowest =
      std::min_element(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.smoothed < b.smoothed; });
  result.lowest_loss_rate = lowest->learning_rate;
  // The first steps' average still leans on too few batches; the last is where it diverged.
  const size_t skip_begin = std::min<size_t>(10, p.size() / 10);
  const size_t skip_end = 1;
  if (p.size() < skip_begin + skip_end + 5) return;
  const size_t first = skip_begin, last = p.size() - skip_end;  // [first, last)
  double steepest = 0.0;
  for (size_t i = first; i < last; ++i) {
    // The slope per natural log of the rate: central differences inside, one-sided at the ends.
    const size_t a = i == first ? i : i - 1;
    const size_t b = i + 1 == last ? i : i + 1;
    const double run = std::log(p[b].learning_rate) - std::log(p[a].learning_rate);
    const double slope = (p[b].smoothed - p[a].smoothed) / run;
    if (slope < steepest) {
      steepest = slope;
      result.suggested_step = static_cast<int64_t>(i);
    }
  }
  if (result.suggested_step >= 0) result.suggested = p[static_cast<size_t>(result.suggested_step)].learning_rate;
}

LrRangeResult lr_range_test(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                            const TrainOptions& train, c10::Device device, const LrRangeOptions& options,
                            const std::function<bool()>& stop_requested) {
  options.validate();
  const size_t windows = dataset.num_windows(data::Split::Train);
  if (windows == 0) throw Error("the learning-rate range test: the training split has no windows");
  const auto start = std::chrono::steady_clock::now();
  FusedAdam optimizer(model->parameters(),
                      torch::optim::AdamOptions(options.min_learning_rate).weight_decay(train.weight_decay));
  const data::BatchOrder order(windows, train.batch_size, train.seed, true);
  const size_t batches = order.num_batches();
  memory::RandomStream random(train.seed, device);
  model->train();

  LrRangeResult result;
  const double growth =
      std::log(options.max_learning_rate / options.min_learning_rate) / static_cast<double>(options.steps - 1);
  double average = 0.0, lowest = INFINITY;
  std::optional<data::EpochOrder> epoch_order;
  for (int64_t step = 0; step < options.steps; ++step) {
    const auto epoch = static_cast<int64_t>(static_cast<size_t>(step) / batches);
    const size_t b = static_cast<size_t>(step) % batches;
    if (b == 0) epoch_order.emplace(order.epoch_order(epoch));
    const size_t first = b * train.batch_size;
    const auto batch = data::make_batch(dataset, data::Split::Train,
                                        epoch_order->slice(first, std::min(first + train.batch_size, windows)));
    const double lr = options.min_learning_rate * std::exp(growth * static_cast<double>(step));
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    at::Tensor loss;
    random.run([&] { loss = training_step(model, optimizer, batch, train.clip_norm, device); });
    LrRangePoint point;
    point.learning_rate = lr;
    point.loss = loss.item<double>();
    average = options.smoothing * average + (1 - options.smoothing) * point.loss;
    point.smoothed = average / (1 - std::pow(options.smoothing, static_cast<double>(step + 1)));
    if (!std::isfinite(point.smoothed)) {
      result.diverged = true;
      break;
    }
    result.points.push_back(point);
    lowest = std::min(lowest, point.smoothed);
    if (point.smoothed > options.divergence * lowest) {
      result.diverged = true;
      break;
    }
    if (stop_requested && stop_requested()) break;
  }
  suggest_learning_rate(result);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

LrRangeResult find_learning_rate(const data::BarSource& source, const TrainingSetup& setup,
                                 const LrRangeOptions& options, TrainingEvents& events) {
  options.validate();  // before any data is read
  auto run = prepare_training(source, setup, events);
  return lr_range_test(run.model, *run.dataset, run.train, run.device, options, setup.stop_requested);
}

nlohmann::json to_json(const LrRangeResult& result, const LrRangeOptions& options) {
  const auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : result.points) {
    points.push_back({{"learning_rate", p.learning_rate}, {"loss", number(p.loss)}, {"smoothed", number(p.smoothed)}});
  }
  return {{"min_learning_rate", options.min_learning_rate},
          {"max_learning_rate", options.max_learning_rate},
          {"steps", options.steps},
          {"smoothing", options.smoothing},
          {"divergence", options.divergence},
          {"diverged", result.diverged},
          {"suggested_learning_rate", number(result.suggested)},
          {"suggested_step", result.suggested_step},
          {"lowest_loss_learning_rate", number(result.lowest_loss_rate)},
          {"seconds", result.seconds},
          {"points", points}};
}

}  // namespace qtft::train
