#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "qtft/dist/collective.h"

namespace torch::nn {
class Module;
}

namespace qtft::dist {

// What data-parallel training asks of the group, on top of Collective's operations.

// Replaces an observer's batch [min, max] (float [2]) by the min and max over all ranks, in
// one all-reduce (the max of [-min, max]; negation is exact).
void reduce_extremes(Collective& group, at::Tensor& min_max);

// Replaces each parameter's gradient by its mean over all ranks. The gradients are packed
// into buckets of at most bucket_bytes, one all-reduce per bucket, so that a model of a
// hundred tensors costs a few collectives, not a hundred. Gloo's ring all-reduce hands every
// rank the same sums, so every rank steps with bitwise the same gradients. Parameters
// without a gradient are left out, as the optimizer leaves them; every rank runs the same
// graph, so every rank leaves out the same ones.
void average_gradients(Collective& group, const std::vector<at::Tensor>& parameters,
                       int64_t bucket_bytes = int64_t{8} << 20);

// What every rank learns at a step's end, from one all-gather of each rank's observers'
// step extremes (float [K, 2] rows of [min, max], quant::step_extremes), loss and stop
// request: the extremes' min and max over the ranks (float [K, 2], on the extremes'
// device), the mean loss (summed in rank order, so every rank has the same bits), and
// whether any rank asked to stop.
struct StepExchange {
  at::Tensor extremes;
  double mean_loss = 0.0;
  bool stop = false;
};
StepExchange exchange_step(Collective& group, const at::Tensor& extremes, double loss, bool stop);

// Rank 0's parameters and buffers (observer state included) on every rank.
void broadcast_weights(Collective& group, torch::nn::Module& module);

// True on every rank when `ok` is true on every rank (one all-reduce): a step that one rank
// does for all (rank 0 building the feature store) tells the others whether it succeeded.
bool all_ranks_agree(Collective& group, bool ok);

// A stop callback for a data-parallel run: true on every rank as soon as `local` (this
// rank's own request, such as its Ctrl-C flag; may be empty) is true on any rank, so that
// all ranks leave at the same step instead of the others waiting in the next collective.
// Each call is one all-reduce: every rank must call it the same number of times. Without
// a group (a single process) it is `local` itself.
std::function<bool()> stop_on_any_rank(std::shared_ptr<Collective> group, std::function<bool()> local);

}  // namespace qtft::dist
