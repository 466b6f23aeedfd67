#include "qtft/train/train_options.h"

#include <nlohmann/json.hpp>

#include "qtft/common/error.h"

namespace qtft::train {

void TrainOptions::validate() const {
  if (epochs < 1) throw UsageError("--epochs must be at least 1, got " + std::to_string(epochs));
  if (batch_size < 1) throw UsageError("--batch-size must be at least 1");
  if (!(learning_rate > 0)) throw UsageError("--learning-rate must be positive");
  if (weight_decay < 0) throw UsageError("--weight-decay must not be negative");
  if (clip_norm < 0) throw UsageError("--clip-norm must not be negative");
  if (patience < 0) throw UsageError("--patience must not be negative");
  if (freeze_observers_after_epochs < 0) throw UsageError("--qat-live-epochs must not be negative");
  if (!(plateau_factor > 0 && plateau_factor < 1)) throw UsageError("the plateau factor must be in (0, 1)");
  if (checkpoint_policy == memory::CheckpointPolicy::Auto && memory_budget_bytes <= 0) {
    throw UsageError("--checkpoint-policy auto needs --memory-budget SIZE (such as 4GiB): the peak to fit in");
  }
  if (checkpoint_policy != memory::CheckpointPolicy::Auto && memory_budget_bytes > 0) {
    throw UsageError("--memory-budget is only used by --checkpoint-policy auto");
  }
}

LrSchedule parse_lr_schedule(const std::string& name) {
  if (name == "none") return LrSchedule::None;
  if (name == "plateau") return LrSchedule::Plateau;
  if (name == "cosine") return LrSchedule::Cosine;
  throw UsageError("--lr-schedule must be none, plateau or cosine, got '" + name + "'");
}

const char* lr_schedule_name(LrSchedule schedule) {
  switch (schedule) {
    case LrSchedule::None: return "none";
    case LrSchedule::Plateau: return "plateau";
    case LrSchedule::Cosine: return "cosine";
  }
  return "?";
}

nlohmann::json to_json(const TrainOptions& o) {
  return {{"epochs", o.epochs},
          {"batch_size", o.batch_size},
          {"learning_rate", o.learning_rate},
          {"weight_decay", o.weight_decay},
          {"clip_norm", o.clip_norm},
          {"lr_schedule", lr_schedule_name(o.schedule)},
          {"patience", o.patience},
          {"seed", o.seed},
          {"max_batches_per_epoch", o.max_batches_per_epoch},
          {"freeze_observers_after_epochs", o.freeze_observers_after_epochs},
          {"checkpoint_policy", memory::checkpoint_policy_name(o.checkpoint_policy)},
          {"memory_budget_bytes", o.memory_budget_bytes}};
}

TrainOptions train_options_from_json(const nlohmann::json& json, TrainOptions o) {
  try {
    o.batch_size = json.at("batch_size").get<size_t>();
    o.learning_rate = json.at("learning_rate").get<double>();
    o.weight_decay = json.at("weight_decay").get<double>();
    o.clip_norm = json.at("clip_norm").get<double>();
    o.schedule = parse_lr_schedule(json.at("lr_schedule").get<std::string>());
    o.patience = json.at("patience").get<int64_t>();
    o.seed = json.at("seed").get<uint64_t>();
    o.max_batches_per_epoch = json.at("max_batches_per_epoch").get<int64_t>();
    o.freeze_observers_after_epochs = json.at("freeze_observers_after_epochs").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("model file: malformed training options: ") + e.what());
  }
  return o;
}

}  // namespace qtft::train
