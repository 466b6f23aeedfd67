#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace qtft::memory {

// What a checkpointed segment's stateful layers recorded in its first forward, so that the
// recompute in the backward pass can replay it. A layer records one entry per call (its
// quantization parameters, say) and the replay hands them back in the same order, per
// layer, so a layer that runs several times inside one segment replays each call exactly.
class RecomputeTape {
 public:
  void record(const void* layer, std::vector<at::Tensor> values);
  // The next recorded entry of `layer`; throws qtft::Error naming `layer_name` and the
  // segment when the replay asks for more calls than the first forward made.
  const std::vector<at::Tensor>& next(const void* layer, const std::string& layer_name);
  // Starts a replay from the first entry again (a second backward through the segment).
  void rewind();
  // Throws qtft::Error when a replay left entries unused: the recompute took another path
  // than the original forward, so its result could not be trusted.
  void check_replayed_all() const;
  void set_segment_name(std::string name) { segment_name_ = std::move(name); }
  const std::string& segment_name() const { return segment_name_; }

 private:
  struct Calls {
    std::vector<std::vector<at::Tensor>> entries;
    size_t replayed = 0;
  };
  std::unordered_map<const void*, Calls> calls_;
  std::string segment_name_;
};

// Which pass of a checkpointed segment the current thread is running.
enum class SegmentPass {
  Plain,      // not inside a checkpointed segment (or inside one that runs without recompute)
  Recording,  // the segment's first forward: stateful layers update and record
  Replaying,  // the recompute in the backward pass: stateful layers replay, never update
};

SegmentPass current_segment_pass();
// True while a checkpointed segment is being recomputed: layers with running state (QAT
// observers, anything with running statistics) must not update it.
bool is_recomputing();
// The tape of the segment being recorded or replayed; nullptr in a plain pass.
RecomputeTape* current_tape();

// Sets the thread's pass and tape for its lifetime and puts the previous ones back.
class SegmentPassScope {
 public:
  SegmentPassScope(SegmentPass pass, RecomputeTape* tape);
  ~SegmentPassScope();
  SegmentPassScope(const SegmentPassScope&) = delete;
  SegmentPassScope& operator=(const SegmentPassScope&) = delete;

 private:
  SegmentPass previous_pass_;
  RecomputeTape* previous_tape_;
};

}  // namespace qtft::memory
