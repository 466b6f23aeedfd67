#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "qtft/common/precision.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/quant/observer_update.h"

namespace qtft::train {

enum class LrSchedule { None, Plateau, Cosine };

// --observer-update: when live QAT observers take a training batch in (quant::ObserverUpdate).
// Auto: Step across ranks (one collective per step), Immediate in a single process.
enum class ObserverUpdateChoice { Auto, Immediate, Step };

struct TrainOptions {
  int64_t epochs = 10;
  size_t batch_size = 64;
  double learning_rate = 1e-3;
  double weight_decay = 0.0;
  double clip_norm = 1.0;  // gradient clipping by global norm; 0 turns it off
  LrSchedule lr_schedule = LrSchedule::Plateau;
  double plateau_factor = 0.5;   // reduce-on-plateau: lr *= factor after
  int64_t plateau_patience = 2;  // this many epochs without improvement
  int64_t patience = 5;          // early stopping; 0 turns it off
  uint64_t seed = 42;
  size_t eval_batch_size = 512;
  int64_t max_batches_per_epoch = 0;  // 0 = all; a cap for quick runs and benchmarks
  // QAT two-phase recipe: freeze every observer once this many epochs of the run are done
  // (0: never). A fraction counts steps: 1.5 freezes after the step that ends the first half
  // of epoch 2.
  double freeze_observers_after_epochs = 0;
  ObserverUpdateChoice observer_update = ObserverUpdateChoice::Auto;
  // Activation checkpointing (--use-gradient-checkpointing, --checkpoint-policy): what the
  // backward pass recomputes. It changes memory and time, never the numbers. Auto measures
  // one step per policy before training and takes the least recomputation whose peak fits
  // memory_budget_bytes.
  memory::CheckpointPolicy checkpoint_policy = memory::CheckpointPolicy::None;
  int64_t memory_budget_bytes = 0;  // only with Auto
  // --precision: the type of the model's products (TemporalFusionTransformerImpl::set_precision).
  // Part of the run like the seed: a resume continues in the precision it was saved in.
  Precision precision = Precision::Fp32;

  void validate() const;  // throws UsageError naming the flag
};

LrSchedule parse_lr_schedule(const std::string& name);  // none | plateau | cosine
const char* lr_schedule_name(LrSchedule schedule);
ObserverUpdateChoice parse_observer_update(const std::string& name);  // auto | immediate | step
// What `choice` means for a run on `ranks` ranks.
quant::ObserverUpdate resolve_observer_update(ObserverUpdateChoice choice, int64_t ranks);
nlohmann::json to_json(const TrainOptions& options);
// The inverse of to_json, for --resume: a run continues with the options it was saved with.
// `epochs` is not read back: it may grow to train further; nor is checkpointing, which
// belongs to the machine a run continues on, not to the run.
TrainOptions train_options_from_json(const nlohmann::json& json, TrainOptions base = {});

}  // namespace qtft::train
