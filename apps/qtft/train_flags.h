#pragma once

// `qtft train`'s flags: what they are, how they become a training setup, and what a
// resumed run takes from its checkpoint's record.

#include <cstdint>
#include <string>

#include "data_flags.h"
#include "qtft/artifact/model_file.h"
#include "qtft/train/run_record.h"
#include "qtft/train/train_options.h"
#include "qtft/train/workflow.h"
#include "run_flags.h"

namespace CLI {
class App;
}

namespace qtft::cli {

struct TrainFlags {
  DataFlags data;
  ModelFlags model;
  QatFlags qat;
  CheckpointFlags checkpointing;
  RuntimeFlags runtime;
  train::TrainOptions train;
  std::string lr_schedule = "plateau";
  std::string observer_update = "auto";  // --observer-update, parsed by finish_train_flags
  std::string save_model, load_model, metrics_json;
  std::string conformal;  // --conformal split: offsets fitted on the validation split, saved with the model
  bool resume = false;
  bool update = false;
  bool epochs_given = false;  // --epochs on the command line (a resumed run keeps its own otherwise)
  int64_t nproc = 1;          // > 1: launch that many local data-parallel workers
  int64_t dist_timeout_s = 300;
};

// Adds the flags of `qtft train` to `cmd`.
void add_train_flags(CLI::App& cmd, TrainFlags& flags);
// The flags a run's training setup takes (data, inputs, windows, model, QAT, checkpointing,
// training, runtime, precision): `train`'s without its file and run flags, for the commands
// that train models of their own (backtest, tune).
void add_training_setup_flags(CLI::App& cmd, TrainFlags& flags);

// The checks a launcher can make before starting workers, so that a bad flag is reported
// once, not by every worker; each worker makes them again.
void finish_train_flags(TrainFlags& f);

// The run the flags ask for; the device, the group and a checkpoint read already are the
// caller's to add.
train::TrainingSetup training_setup(const TrainFlags& f);
// For a command that trains models of its own (backtest, tune): the flags finished, the setup
// on the device they resolve to, stopped by Ctrl-C (install_interrupt_handler first).
train::TrainingSetup interruptible_training_setup(TrainFlags& f);

// What a checkpoint records of the command that made it (the library adds the ranks and
// the save path), so that `qtft train --resume --load-model F` alone continues the run.
train::RunRecord run_record(const TrainFlags& f);

// --resume: what the command line leaves out comes from the checkpoint's record: the data,
// the save path and the epoch budget of the original run. Returns the checkpoint, read once.
artifact::ModelFile continue_recorded_run(TrainFlags& f, bool print, int64_t ranks);

// --compare-accuracy: FP32, PTQ and QAT trained with equal budgets, compared
// (compare_accuracy_run.cpp).
void run_compare_accuracy(const TrainFlags& f);

}  // namespace qtft::cli
