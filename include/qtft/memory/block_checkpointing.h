#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <string_view>
#include <vector>

#include "qtft/memory/checkpoint.h"
#include "qtft/memory/checkpoint_policy.h"

namespace qtft::memory {

// Which named blocks of a forward pass the backward recomputes instead of keeping, as a
// checkpoint policy says, and the call that runs a block accordingly. A model names its
// blocks and runs each through this; it never asks whether it is checkpointed. Every
// block is a segment boundary (run_segment) whatever the policy, so every policy computes
// bitwise the same step.
//   None    no block
//   Blocks  every block, the encoder LSTM as one ("lstm_encoder")
//   Lstm    every block, the encoder LSTM chunk by chunk ("lstm_encoder_chunk") instead
class BlockCheckpointing {
 public:
  // Auto must be resolved (by measuring) first: throws qtft::Error otherwise.
  explicit BlockCheckpointing(CheckpointPolicy policy = CheckpointPolicy::None);

  bool checkpoints(std::string_view block) const;
  // run_segment(block, checkpoints(block), inputs, fn).
  std::vector<at::Tensor> run(const std::string& block, const std::vector<at::Tensor>& inputs,
                              const SegmentFunction& fn) const;
  // The same for a block of one output.
  at::Tensor run_one(const std::string& block, const std::vector<at::Tensor>& inputs, const SegmentFunction& fn) const;

 private:
  CheckpointPolicy policy_;
};

}  // namespace qtft::memory
