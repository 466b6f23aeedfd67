#include "qtft/train/train_options.h"

#include <nlohmann/json.hpp>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"

namespace qtft::memory {
NLOHMANN_JSON_SERIALIZE_ENUM(CheckpointPolicy, {{CheckpointPolicy::None, "none"},
                                                {CheckpointPolicy::Blocks, "blocks"},
                                                {CheckpointPolicy::Lstm, "lstm"},
                                                {CheckpointPolicy::Auto, "auto"}})
}  // namespace qtft::memory

namespace qtft {
NLOHMANN_JSON_SERIALIZE_ENUM(Precision, {{Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}})
}  // namespace qtft

namespace qtft::train {

void TrainOptions::validate() const {
  if (epochs < 1) throw UsageError("--epochs must be at least 1, got " + std::to_string(epochs));
  if (batch_size < 1) throw UsageError("--batch-size must be at least 1");
  if (!(learning_rate > 0)) throw UsageError("--learning-rate must be positive");
  if (weight_decay < 0) throw UsageError("--weight-decay must not be negative");
  if (clip_norm < 0) throw UsageError("--clip-norm must not be negative");
  if (patience < 0) throw UsageError("--patience must not be negative");
  if (!(freeze_observers_after_epochs >= 0)) throw UsageError("--qat-live-epochs must not be negative");
  if (!(plateau_factor > 0 && plateau_factor < 1)) throw UsageError("the plateau factor must be in (0, 1)");
  if (checkpoint_policy == memory::CheckpointPolicy::Auto && memory_budget_bytes <= 0) {
    throw UsageError(
        "--checkpoint-policy auto needs --memory-budget SIZE (such as 4GiB) or --gpu-memory-limit: the peak to fit in");
  }
  if (checkpoint_policy != memory::CheckpointPolicy::Auto && memory_budget_bytes > 0) {
    throw UsageError("--memory-budget is only used by --checkpoint-policy auto");
  }
}

namespace {
constexpr EnumNames<LrSchedule, 3> kLrSchedules{
    {{LrSchedule::None, "none"}, {LrSchedule::Plateau, "plateau"}, {LrSchedule::Cosine, "cosine"}}};
constexpr EnumNames<ObserverUpdateChoice, 3> kObserverUpdates{{{ObserverUpdateChoice::Auto, "auto"},
                                                               {ObserverUpdateChoice::Immediate, "immediate"},
                                                               {ObserverUpdateChoice::Step, "step"}}};
}  // namespace

ObserverUpdateChoice parse_observer_update(const std::string& name) {
  return parse_enum(kObserverUpdates, name, "--observer-update");
}

quant::ObserverUpdate resolve_observer_update(ObserverUpdateChoice choice, int64_t ranks) {
  switch (choice) {
    case ObserverUpdateChoice::Immediate: return quant::ObserverUpdate::Immediate;
    case ObserverUpdateChoice::Step: return quant::ObserverUpdate::Step;
    case ObserverUpdateChoice::Auto: break;
  }
  return ranks > 1 ? quant::ObserverUpdate::Step : quant::ObserverUpdate::Immediate;
}

LrSchedule parse_lr_schedule(const std::string& name) { return parse_enum(kLrSchedules, name, "--lr-schedule"); }

const char* lr_schedule_name(LrSchedule schedule) { return enum_name(kLrSchedules, schedule); }

// One definition of the fields: a field added to TrainOptions and left out here is a
// compile-time choice, not a silent omission. Missing keys read as the defaults.
NLOHMANN_JSON_SERIALIZE_ENUM(LrSchedule, {{LrSchedule::None, "none"},
                                          {LrSchedule::Plateau, "plateau"},
                                          {LrSchedule::Cosine, "cosine"}})
NLOHMANN_JSON_SERIALIZE_ENUM(ObserverUpdateChoice, {{ObserverUpdateChoice::Auto, "auto"},
                                                    {ObserverUpdateChoice::Immediate, "immediate"},
                                                    {ObserverUpdateChoice::Step, "step"}})
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TrainOptions, epochs, batch_size, learning_rate, weight_decay,
                                                clip_norm, lr_schedule, plateau_factor, plateau_patience, patience,
                                                seed, eval_batch_size, max_batches_per_epoch,
                                                freeze_observers_after_epochs, observer_update, checkpoint_policy,
                                                memory_budget_bytes, precision)

nlohmann::json to_json(const TrainOptions& o) { return nlohmann::json(o); }

TrainOptions train_options_from_json(const nlohmann::json& json, TrainOptions base) {
  TrainOptions saved;
  try {
    // nlohmann maps an unknown enum name to the first value; a bad name is an error here.
    if (json.contains("lr_schedule")) parse_lr_schedule(json.at("lr_schedule").get<std::string>());
    if (json.contains("observer_update")) parse_observer_update(json.at("observer_update").get<std::string>());
    if (json.contains("precision")) parse_precision(json.at("precision").get<std::string>(), "precision");
    saved = json.get<TrainOptions>();
    // Saved before --observer-update existed: its observers updated in every forward.
    if (!json.contains("observer_update")) saved.observer_update = ObserverUpdateChoice::Immediate;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("model file: malformed training options: ") + e.what());
  }
  // The run's own epochs and checkpointing stay the caller's (see the header).
  saved.epochs = base.epochs;
  saved.checkpoint_policy = base.checkpoint_policy;
  saved.memory_budget_bytes = base.memory_budget_bytes;
  return saved;
}

}  // namespace qtft::train
