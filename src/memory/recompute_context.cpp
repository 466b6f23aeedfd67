#include "qtft/memory/detail/recompute_context.h"

#include "qtft/common/error.h"

namespace qtft::memory {
namespace {

thread_local SegmentPass t_pass = SegmentPass::Plain;
thread_local RecomputeTape* t_tape = nullptr;

}  // namespace

void RecomputeTape::record(const void* layer, std::vector<at::Tensor> values) {
  calls_[layer].entries.push_back(std::move(values));
}

const std::vector<at::Tensor>& RecomputeTape::next(const void* layer, const std::string& layer_name) {
  auto it = calls_.find(layer);
  const size_t recorded = it == calls_.end() ? 0 : it->second.entries.size();
  if (it == calls_.end() || it->second.replayed >= recorded) {
    throw Error("checkpoint segment '" + segment_name_ + "': the recompute called " + layer_name + " " +
                std::to_string(recorded + 1) + " time(s), but the original forward called it " +
                std::to_string(recorded) +
                " time(s); a checkpointed segment must run the same layers in the "
                "same order both times");
  }
  return it->second.entries[it->second.replayed++];
}

void RecomputeTape::rewind() {
  for (auto& [layer, calls] : calls_) calls.replayed = 0;
}

void RecomputeTape::check_replayed_all() const {
  size_t missing = 0;
  for (const auto& [layer, calls] : calls_) missing += calls.entries.size() - calls.replayed;
  if (missing > 0) {
    throw Error("checkpoint segment '" + segment_name_ + "': the recompute skipped " + std::to_string(missing) +
                " recorded call(s) of stateful layers; a checkpointed segment must run the same layers in the "
                "same order both times");
  }
}

SegmentPass current_segment_pass() { return t_pass; }

bool is_recomputing() { return t_pass == SegmentPass::Replaying; }

RecomputeTape* current_tape() { return t_tape; }

SegmentPassScope::SegmentPassScope(SegmentPass pass, RecomputeTape* tape)
    : previous_pass_(t_pass), previous_tape_(t_tape) {
  t_pass = pass;
  t_tape = tape;
}

SegmentPassScope::~SegmentPassScope() {
  t_pass = previous_pass_;
  t_tape = previous_tape_;
}

}  // namespace qtft::memory
