#include "qtft/memory/block_checkpointing.h"

#include "qtft/common/error.h"

namespace qtft::memory {

BlockCheckpointing::BlockCheckpointing(CheckpointPolicy policy) : policy_(policy) {
  if (policy == CheckpointPolicy::Auto) {
    throw Error("the auto checkpoint policy must be resolved (by measuring) before a forward runs under it");
  }
}

bool BlockCheckpointing::checkpoints(std::string_view block) const {
  switch (policy_) {
    case CheckpointPolicy::None: return false;
    case CheckpointPolicy::Blocks: return block != "lstm_encoder_chunk";
    case CheckpointPolicy::Lstm: return block != "lstm_encoder";
    case CheckpointPolicy::Auto: break;
  }
  return false;
}

std::vector<at::Tensor> BlockCheckpointing::run(const std::string& block, const std::vector<at::Tensor>& inputs,
                                                const SegmentFunction& fn) const {
  return run_segment(block, checkpoints(block), inputs, fn);
}

at::Tensor BlockCheckpointing::run_one(const std::string& block, const std::vector<at::Tensor>& inputs,
                                       const SegmentFunction& fn) const {
  return run(block, inputs, fn)[0];
}

}  // namespace qtft::memory
