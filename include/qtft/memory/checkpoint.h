#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace qtft::memory {

// A segment of a forward pass: a function of tensors only. It may use modules captured by
// reference (their parameters receive gradients), must return fresh tensors (not one of
// its inputs), and must run the same layers in the same order every time it is called.
using SegmentFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs)>;

struct CheckpointOptions {
  // Stateful layers record in the first forward and replay in the recompute (see
  // recompute_context.h). false gives the naive recompute of PyTorch's checkpoint, where
  // observers update a second time in the backward pass: kept only to show that problem.
  bool replay_layer_state = true;
};

// Reentrant activation checkpointing for LibTorch. The forward runs `fn`, drops its graph
// and intermediates, and keeps only `inputs` (it records with gradient on, as a plain
// forward does, because some kernels compute other bits without it); the backward restores the random state of that
// forward, runs `fn` again with gradient (stateful layers replaying what they recorded), backpropagates the incoming
// gradients through it, and returns the gradients of `inputs`. Parameters used inside receive their gradients during
// that inner backward.
//
// The result is bitwise what run_segment(name, /*checkpointed=*/false, ...) gives: outputs,
// gradients, random stream after the step, and layer state. A segment called while another
// is being recorded or recomputed, or with gradient off, runs plainly: nesting is allowed.
// The backward throws qtft::Error when recompute cannot be trusted: under
// torch::autograd::grad (or backward with explicit inputs), when an input was modified in
// place after the forward, or when the recompute took another path than the forward.
std::vector<at::Tensor> checkpoint(const std::string& name, const SegmentFunction& fn,
                                   const std::vector<at::Tensor>& inputs, CheckpointOptions options = {});

// `fn` as a segment boundary: checkpointed, or run now keeping its activations. The plain
// form passes each input that requires gradient through an alias, so that the gradient of
// an input used several times inside is summed inside the segment and leaves it as one
// contribution, as it does from a checkpoint. With the same boundaries, a model computes
// bitwise the same step whichever of its segments are checkpointed.
// The function comes last, so that callers can write it inline.
std::vector<at::Tensor> run_segment(const std::string& name, bool checkpointed, const std::vector<at::Tensor>& inputs,
                                    const SegmentFunction& fn);

}  // namespace qtft::memory
