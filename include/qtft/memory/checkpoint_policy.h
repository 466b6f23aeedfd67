#pragma once

#include <cstdint>
#include <string>

namespace qtft::memory {

// Which parts of the TFT a training step recomputes in its backward pass instead of
// keeping their activations. Every policy computes bitwise the same step; they differ in
// memory and time only.
//   None    keep everything (no recomputation)
//   Blocks  each block (input embeddings, selection networks, LSTM encoder, LSTM decoder,
//           enrichment, attention, position-wise GRN and output) keeps only its inputs
//   Lstm    Blocks, with the encoder LSTM checkpointed per time chunk (about sqrt(L) chunks)
//           instead of as one block, so its recompute holds one chunk's activations at a time
//   Auto    measure one step under each of the above and pick the least recomputation that
//           fits a memory budget; resolved before training, never seen by the model
enum class CheckpointPolicy { None, Blocks, Lstm, Auto };

// none | blocks | lstm | auto; throws UsageError naming the value otherwise.
CheckpointPolicy parse_checkpoint_policy(const std::string& name);
const char* checkpoint_policy_name(CheckpointPolicy policy);

}  // namespace qtft::memory
