// `qtft train`: flags in, train::run_training, events and the summary printed. Alone, as a
// rank under torchrun, or as the launcher of --nproc local workers.
#include <ATen/Parallel.h>
#include <c10/util/Logging.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.h"
#include "exit_code.h"
#include "interrupt.h"
#include "local_launch.h"
#include "qtft/artifact/model_file.h"
#include "qtft/common/device_choice.h"
#include "qtft/common/error.h"
#include "qtft/dist/collective.h"
#include "qtft/dist/environment.h"
#include "qtft/train/calibration.h"
#include "qtft/train/run_training.h"
#include "train_flags.h"
#include "training_printer.h"

namespace qtft::cli {
namespace {

// Saves with Ctrl-C held back, so a signal cannot leave a half-written temporary behind; a
// signal that came meanwhile is acted on once the file is in place.
void save_whole(const std::filesystem::path& path, const artifact::ModelFile& file) {
  SignalsHeld held;
  artifact::save_model_file(path, file);
}

// This process's part in a data-parallel run: a rank of the group torchrun (or --nproc)
// describes in the environment, or nothing for a run of its own.
std::shared_ptr<dist::Collective> join_data_parallel_group(const TrainFlags& f, std::chrono::milliseconds timeout) {
  auto env = dist::distributed_environment();
  if (!env) return nullptr;
  if (f.qat.compare_accuracy)
    throw UsageError("--compare-accuracy trains its models in one process: run it without torchrun");
  // c10d logs every failed connection attempt, with a C++ backtrace; the error qtft prints
  // names the rank, the operation and the cause. The program's choice, not the library's;
  // TORCH_CPP_LOG_LEVEL, when the user sets it, still decides.
  if (!dist::process_environment("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = c10::GLOG_FATAL;
  const auto backend = train::data_parallel_backend(parse_device_choice(f.runtime.device, "--device"));
  return std::make_shared<dist::Collective>(dist::Collective::connect(*env, timeout, backend));
}

// `--nproc N`: this process checks the flags once, then only starts the N workers (this
// command line without --nproc) and waits for them; returns their exit code.
int launch_local_workers(TrainFlags& f, std::chrono::milliseconds dist_timeout) {
  if (dist::distributed_environment()) {
    throw UsageError("--nproc starts workers of its own: leave it out under torchrun (WORLD_SIZE is set)");
  }
  finish_train_flags(f);
  if (f.qat.compare_accuracy) throw UsageError("--compare-accuracy trains its models in one process: drop --nproc");
  if (!f.resume) {  // a resumed run's options come from its checkpoint, which the workers read
    train::check_training_setup(training_setup(f));
  }
  // Ctrl-C is counted and passed on to the workers, which save and stop.
  install_interrupt_counter();
  return run_as_local_workers(f.nproc, dist_timeout);
}

void run_train(TrainFlags& f) {
  if (f.dist_timeout_s < 1)
    throw UsageError("--dist-timeout must be at least 1 second, got " + std::to_string(f.dist_timeout_s));
  const std::chrono::milliseconds dist_timeout(f.dist_timeout_s * 1000);
  if (f.nproc > 1) throw ExitCode{launch_local_workers(f, dist_timeout)};
  // First of all: a Ctrl-C while the data loads still ends in a checkpoint after one step.
  install_interrupt_handler();
  stop_when_the_launcher_dies();
  finish_train_flags(f);
  auto group = join_data_parallel_group(f, dist_timeout);
  // Rank 0 alone prints and writes files; every rank reports its own errors on stderr.
  const bool leader = !group || group->rank() == 0;
  const int64_t ranks = group ? group->world_size() : 1;
  if (f.qat.compare_accuracy) {
    run_compare_accuracy(f);
    return;
  }
  std::optional<artifact::ModelFile> checkpoint;
  if (f.resume && !f.load_model.empty()) checkpoint = continue_recorded_run(f, leader, ranks);
  finish_data_flags(f.data);

  train::TrainingRequest request;
  request.source = f.data.source;
  request.setup = training_setup(f);
  request.setup.model_file = std::move(checkpoint);
  request.setup.device = train::training_device(parse_device_choice(f.runtime.device, "--device"), group);
  f.runtime.limit_gpu_memory(request.setup.device);
  request.setup.group = group;
  request.setup.stop_requested = interrupt_requested;
  request.save_model = f.save_model;
  request.metrics_json = f.metrics_json;
  request.conformal_split = f.conformal == "split";
  request.record = run_record(f);
  request.save = save_whole;
  ConsolePrinter printer(request.source, f.qat.verbose, request.setup.device);
  auto progress = train::make_console_progress(stdout, stdout_is_terminal());
  auto outcome = [&] {
    try {
      return train::run_training(request, printer, *progress);
    } catch (const train::Interrupted& e) {
      if (leader) std::fprintf(stderr, "\nqtft: %s\n", e.what());
      throw ExitCode{130};
    }
  }();

  if (outcome.result.interrupted) {
    if (leader) print_interrupted(outcome);
    throw ExitCode{130};
  }
  if (!leader) return;
  print_summary(outcome);
  if (outcome.conformal_windows > 0) {
    std::cout << "Conformal offsets (split) fitted on " << outcome.conformal_windows
              << " validation windows, saved with the model\n";
  }
  if (!f.save_model.empty()) std::cout << "Saved " << f.save_model << "\n";
  if (interrupt_requested()) {
    // The signal came after the last step: the files above are complete, but say so.
    std::fprintf(stderr, "qtft: interrupted while finishing; %s\n",
                 f.save_model.empty() ? "nothing was being saved"
                                      : ("the model was saved completely to " + f.save_model).c_str());
    throw ExitCode{130};
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  auto* cmd = app.add_subcommand("train", "Train a TFT forecaster on bars (the embedded data by default)");
  add_train_flags(*cmd, *flags);
  cmd->callback([flags, cmd] {
    flags->epochs_given = cmd->count("--epochs") > 0;
    run_train(*flags);
  });
}

}  // namespace qtft::cli
