#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qtft/data/features/batch.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/model/tft_options.h"
#include "qtft/train/step_memory.h"
#include "qtft/train/train_options.h"

namespace qtft::train {

// What --checkpoint-policy auto measured and chose.
struct CheckpointChoice {
  memory::CheckpointPolicy policy = memory::CheckpointPolicy::None;
  // Each policy measured, in the order tried (least recomputation first).
  std::vector<std::pair<memory::CheckpointPolicy, StepMemory>> measured;
  // The step's total peak without checkpointing (always measured first).
  int64_t peak_without_checkpointing() const { return measured.front().second.total_peak_bytes; }
  std::string summary(int64_t budget_bytes) const;
};

// Measures one real training step (measure_training_step: a fresh model, the same batch
// and seed) without checkpointing, then with blocks, then with lstm, and stops at the
// first whose total peak fits `budget_bytes`. Throws qtft::Error naming the budget and
// every measured peak when none fits.
CheckpointChoice choose_checkpoint_policy(const model::TftOptions& options, uint64_t seed, const data::Batch& batch,
                                          const TrainOptions& train, c10::Device device, int64_t budget_bytes);

}  // namespace qtft::train
