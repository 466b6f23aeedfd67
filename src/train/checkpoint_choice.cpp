#include "qtft/train/detail/checkpoint_choice.h"

#include "qtft/common/error.h"
#include "qtft/common/format.h"

namespace qtft::train {
namespace {

std::string measured_list(const CheckpointChoice& choice) {
  std::string text;
  for (const auto& [policy, step] : choice.measured) {
    if (!text.empty()) text += ", ";
    if (policy == memory::CheckpointPolicy::None) {
      text += "without checkpointing";
    } else {
      text.append("with ").append(memory::checkpoint_policy_name(policy));
    }
    text.append(" ").append(step.out_of_memory ? "out of memory"
                                               : format_bytes(static_cast<uint64_t>(step.total_peak_bytes)));
  }
  return text;
}

}  // namespace

std::string CheckpointChoice::summary(int64_t budget_bytes) const {
  return std::string("Checkpoint policy auto: ") + memory::checkpoint_policy_name(policy) + " (step peak " +
         measured_list(*this) + "; budget " + format_bytes(static_cast<uint64_t>(budget_bytes)) + ")";
}

CheckpointChoice choose_checkpoint_policy(const model::TftOptions& options, uint64_t seed, const data::Batch& batch,
                                          const TrainOptions& train, c10::Device device, int64_t budget_bytes) {
  using memory::CheckpointPolicy;
  CheckpointChoice choice;
  for (CheckpointPolicy policy : {CheckpointPolicy::None, CheckpointPolicy::Blocks, CheckpointPolicy::Lstm}) {
    const StepMemory step = measure_training_step(options, seed, batch, train, policy, device, /*timed_steps=*/0);
    choice.measured.emplace_back(policy, step);
    // Under --gpu-memory-limit a step that does not fit runs out of memory before its peak.
    if (!step.out_of_memory && step.total_peak_bytes <= budget_bytes) {
      choice.policy = policy;
      return choice;
    }
  }
  throw Error("--memory-budget " + format_bytes(static_cast<uint64_t>(budget_bytes)) +
              ": no checkpoint policy fits one training step (measured: " + measured_list(choice) +
              "); raise the budget or lower --batch-size");
}

}  // namespace qtft::train
