#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>

#include "qtft/artifact/model_file.h"
#include "qtft/data/features/dataset.h"
#include "qtft/dist/ranks.h"
#include "qtft/eval/metrics.h"
#include "qtft/memory/rng_state.h"
#include "qtft/model/tft.h"
#include "qtft/train/progress.h"
#include "qtft/train/train_options.h"

namespace torch::optim {
class Adam;
}

namespace qtft::dist {
class Collective;
}

namespace qtft::train {

struct TrainResult {
  int64_t epochs_completed = 0;
  int64_t best_epoch = 0;
  eval::ForecastMetrics best_val;
  bool interrupted = false;
  bool paused = false;  // ended at pause_after_epoch, the run not finished
  bool stopped_early = false;
  double train_seconds = 0.0;
  // A step ran out of memory (interrupted is set too: the run is saved as on a stop): what
  // happened, where, the peaks it reached and what to change. Empty otherwise.
  std::string out_of_memory;
};

// The training loop: Adam with weight decay, gradient clipping by global norm, a
// reduce-on-plateau or cosine learning-rate schedule, and early stopping that keeps the
// best epoch's weights. On the CPU, the same seed gives bit-identical losses and weights;
// an interrupted run resumed from its checkpoint continues exactly as if never stopped.
// Activation checkpointing (options.checkpoint_policy) changes memory and time only. Each
// epoch reports the highest memory a step held when it is tracked (on CUDA, or on the CPU
// after memory::install_cpu_memory_tracking).
//
// Dropout draws from the trainer's own random stream, seeded by options.seed and saved in
// its state; the process's generators are left as they were. The dataset is shared, so a
// temporary passed in stays alive as long as the trainer.
class Trainer {
 public:
  Trainer(model::TemporalFusionTransformer model, std::shared_ptr<const data::Dataset> dataset, TrainOptions options,
          c10::Device device);
  ~Trainer();

  // Restores the loop, optimizer and random state saved by state(), and the best weights.
  void resume_from(const artifact::TrainingState& state, const artifact::NamedTensors& best_weights);

  // Trains until the epoch budget, early stopping, or until `stop_requested` (polled after
  // every step; the CLI maps Ctrl-C onto it) returns true: then the result says
  // interrupted and state() resumes exactly at the next batch.
  TrainResult fit(ProgressReporter& progress, const std::function<bool()>& stop_requested = {});

  // Data-parallel training over `group`: every rank runs its own Trainer on the same data,
  // options and seed. fit() then starts from rank 0's weights, takes global batches of
  // batch_size x world_size windows in the seeded order and gives each rank its slice
  // (the epoch's last, partial global batch is left out, so that every rank steps with
  // batch_size windows), averages gradients before each step (dist::average_gradients),
  // reports losses averaged over ranks, and makes every observer update from the min and
  // max over all ranks. Each rank validates its share of the batches
  // (dist::evaluate_sharded), with the figures of one process. A stop requested on any
  // rank stops every rank after the same step (one small all-reduce per poll). Every rank
  // ends with bitwise the same weights and observers; the caller decides who prints and
  // writes. A null group is a world of one (dist::Ranks): the trainer never asks which.
  void set_data_parallel(std::shared_ptr<dist::Collective> group);

  // fit() returns once `epoch` epochs of the run are complete (result.paused), leaving it
  // unfinished, so that a later phase can take over from state(): the FP32 phase of the
  // QAT recipe that starts from FP32. 0: no pause.
  void pause_after_epoch(int64_t epoch) { pause_after_epoch_ = epoch; }

  // Takes over a run where an earlier phase paused (a trainer of another model, e.g. FP32
  // before QAT): the epoch count, the step count, the history and the random stream go on,
  // so the batches and dropout masks that come next are those the run would have drawn,
  // while the optimizer, the best epoch, early stopping and the schedule start afresh.
  void continue_after(const artifact::TrainingState& earlier_phase);

  // A snapshot for a resumable checkpoint (CPU copies).
  artifact::TrainingState state() const;
  // The best epoch's weights, or the current ones before any epoch finished.
  artifact::NamedTensors best_weights() const;
  model::TemporalFusionTransformer& model() { return model_; }

 private:
  // One step on this rank's windows, ended with every rank (dist::Ranks::end_step): the mean
  // loss over the ranks, and whether any rank asked to stop. A step that runs out of memory
  // is not taken (the random stream goes back to where it began): StepOutOfMemory.
  dist::Ranks::StepOutcome train_step(const std::vector<size_t>& indices, bool stop_requested);
  // --checkpoint-policy auto: measures and sets the policy (once per trainer).
  void choose_checkpoint_policy(ProgressReporter& progress);
  // Freezes observers when due, validates, keeps the best weights, steps the schedule;
  // false when a stop request cut the validation pass short (nothing recorded then).
  bool end_epoch(EpochSummary& summary, const std::function<bool()>& stop_requested);
  void set_learning_rate(double lr);
  // The one line TrainResult::out_of_memory holds: where, the peaks, what to change. Batch
  // 0: the epoch's validation pass.
  std::string out_of_memory_message(int64_t epoch, size_t batch, const std::string& cause) const;

  model::TemporalFusionTransformer model_;
  std::shared_ptr<const data::Dataset> dataset_;
  TrainOptions options_;
  c10::Device device_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  artifact::TrainingState state_;
  artifact::NamedTensors best_weights_;
  memory::RandomStream random_;
  dist::Ranks ranks_;  // a world of one unless set_data_parallel
  int64_t pause_after_epoch_ = 0;
  bool checkpoint_policy_chosen_ = false;
  int64_t peak_without_checkpointing_ = -1;  // measured by the auto policy
  bool track_memory_ = false;                // the device's memory is counted (set by fit)
  int64_t epoch_peak_memory_ = -1;           // this epoch's highest step peak, -1 untracked
  int64_t epoch_collectives_ = 0;            // collective operations of this run's steps this epoch
};

}  // namespace qtft::train
