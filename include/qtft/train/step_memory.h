#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "qtft/data/features/batch.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/model/tft_options.h"
#include "qtft/train/train_options.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Adam;
}

namespace qtft::train {

// One measured training step of a fresh model, in bytes of tensors on the step's device as
// the allocator counts them (the tracking CPU allocator, or CUDA's caching allocator
// statistics): measured, never estimated from shapes.
struct StepMemory {
  int64_t weights_bytes = 0;          // the model's parameters
  int64_t gradients_bytes = 0;        // the parameters' gradients after a step (defined ones)
  int64_t optimizer_bytes = 0;        // Adam's moments: exp_avg, exp_avg_sq (and max_exp_avg_sq)
  int64_t observer_bytes = 0;         // buffers of the QAT activation observers (0 without QAT)
  int64_t activation_peak_bytes = 0;  // the step's peak above what was held when it began:
                                      // activations kept for backward, their gradients, the
                                      // new parameter gradients while the old are still alive,
                                      // optimizer temporaries
  int64_t total_peak_bytes = 0;       // the step's peak above what was held before the model
                                      // was built: weights, gradients, optimizer state,
                                      // observers, the batch on the device and the activations
  int64_t reserved_peak_bytes = 0;    // CUDA: the caching allocator's reserved peak over the
                                      // measured step (what --gpu-memory-limit caps); the CPU:
                                      // as total_peak_bytes
  double step_seconds = 0.0;          // median wall time of the timed steps
  // The step ran out of memory (under --gpu-memory-limit, or the machine's): the figures are
  // those reached before it failed, and step_seconds is 0.
  bool out_of_memory = false;
};

// Bytes of tensors as held now, summed over the tensors themselves (no allocator needed).
int64_t parameter_bytes(torch::nn::Module& model);
int64_t gradient_bytes(torch::nn::Module& model);  // defined gradients only
int64_t adam_state_bytes(torch::optim::Adam& adam);
int64_t observer_bytes(torch::nn::Module& model);  // buffers of the QAT activation observers
// What a training step keeps between steps: parameters, gradients, all buffers, Adam's state.
int64_t training_state_bytes(torch::nn::Module& model, torch::optim::Adam& adam);

// Builds a fresh model with build_model(options, seed) and `policy` on `device`, takes one
// warm-up training_step on `batch` (which allocates gradients, Adam's state and one-off
// caches), then measures the next step's memory, then times `timed_steps` more steps (0:
// step_seconds is the measured step's own time).
// Adam is built as the trainer builds it (train.learning_rate, train.weight_decay), steps
// clip at train.clip_norm. The global CPU (and CUDA) random state is put back at the end,
// so the caller's random stream is unchanged. On the CPU it needs the tracking allocator
// (memory::install_cpu_memory_tracking, installed by the program before any tensor work)
// and throws qtft::Error saying so when it is absent; it never installs it itself.
// On CUDA it first hands the caching allocator's unused blocks back (memory::
// release_cached_memory), so that its reserved peak is its own: the program's cache is
// emptied, as torch.cuda.empty_cache() would.
// A step that runs out of memory ends the measurement with out_of_memory set, not an error.
// Throws UsageError for CheckpointPolicy::Auto (resolve it first) or timed_steps < 0.
StepMemory measure_training_step(const model::TftOptions& options, uint64_t seed, const data::Batch& batch,
                                 const TrainOptions& train, memory::CheckpointPolicy policy, c10::Device device,
                                 int timed_steps = 3);

// The same step without checkpointing and with `policy`: same options, seed and batch.
struct MemoryReport {
  memory::CheckpointPolicy policy = memory::CheckpointPolicy::Blocks;
  StepMemory without, with;
  double step_time_ratio() const;  // with / without: the time recomputation costs
};

MemoryReport measure_memory_report(const model::TftOptions& options, uint64_t seed, const data::Batch& batch,
                                   const TrainOptions& train, memory::CheckpointPolicy policy, c10::Device device,
                                   int timed_steps = 3);

// {"policy", "without": {rows}, "with": {rows}, "savings": {...}, "step_time_ratio"}
nlohmann::json to_json(const StepMemory& step);
nlohmann::json to_json(const MemoryReport& report);
// Rows: model weights, gradients, optimizer state, QAT observers, activation peak, total
// peak, step time; columns: without checkpointing, with <policy>, saved.
std::string format_memory_report(const MemoryReport& report);

}  // namespace qtft::train
