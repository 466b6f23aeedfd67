#pragma once

// `qtft train` as one library call: prepare (data, model, QAT), train, and write what the
// run produced, alone or as one rank of a data-parallel group. The program parses its
// flags into a TrainingRequest and prints the events; an embedding application does the
// same with its own configuration.

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>

#include "qtft/artifact/model_file.h"
#include "qtft/common/device_choice.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/features/regime_coverage.h"
#include "qtft/dist/collective.h"
#include "qtft/eval/baselines.h"
#include "qtft/train/progress.h"
#include "qtft/train/run_record.h"
#include "qtft/train/trainer.h"
#include "qtft/train/workflow.h"

namespace qtft::train {

// Where an interrupted run without a save path leaves its checkpoint.
inline constexpr const char* kInterruptedCheckpoint = "qtft-interrupted.safetensors";

struct TrainingRequest {
  data::BarSource source;
  TrainingSetup setup;                 // with its device, group and stop_requested
  std::filesystem::path save_model;    // the best model and its training state; empty: none
  std::filesystem::path metrics_json;  // the metrics document; empty: none
  // Split conformal offsets fitted on the validation split with the best weights, saved in
  // the model file (qtft.conformal) for `forecast --conformal split`.
  bool conformal_split = false;
  RunRecord record;  // stored in the file; ranks and save path are set here
  // How model files are written (artifact::save_model_file when empty): a program may hold
  // back its signals meanwhile, so that none leaves a half-written temporary behind.
  std::function<void(const std::filesystem::path&, const artifact::ModelFile&)> save;
};

struct TrainingOutcome {
  bool leader = true;  // alone or rank 0: reported the events and wrote the files
  int64_t ranks = 1;
  TrainResult result;               // result.interrupted: stopped, and saved resumably (by the leader)
  eval::BaselineMetrics baselines;  // on the validation split
  int64_t parameters = 0;
  TrainOptions train;              // as the run used them (a QAT phase's own)
  artifact::TrainingState state;   // as saved
  std::filesystem::path saved_to;  // the model, or the interrupted run's checkpoint; empty: none
  std::optional<data::RegimeCoverage> calibration_coverage;  // the last calibration's
  int64_t unknown_category_rows = 0;  // data rows with a categorical level the training split lacks
  std::string feature_store;          // the store it trained from, kept (an update's own is removed); "" for none
  int64_t conformal_windows = 0;      // request.conformal_split: the validation windows the offsets were fitted on
};

// The backend a data-parallel run on `choice` uses: NCCL for --device cuda, else Gloo (auto
// included: a group's ranks all train on the CPU then).
dist::Backend data_parallel_backend(DeviceChoice choice);
// The device a run trains on: the choice alone; in a data-parallel group the group's
// (the CPU for Gloo, this rank's GPU for NCCL).
c10::Device training_device(DeviceChoice choice, const std::shared_ptr<dist::Collective>& group);

// Runs the training `request` describes. The leader (alone, or rank 0) reports to `events`
// and `progress`, the other ranks stay quiet. At the end the leader writes the best model
// and the metrics document; after an interrupt (setup.stop_requested) a resumable checkpoint
// to the save path, else kInterruptedCheckpoint. Every rank returns once the leader's files
// are complete. Throws Interrupted when stopped before training began (nothing to save),
// and qtft::Error / UsageError for what the request or its data get wrong.
TrainingOutcome run_training(const TrainingRequest& request, TrainingEvents& events, ProgressReporter& progress);

}  // namespace qtft::train
