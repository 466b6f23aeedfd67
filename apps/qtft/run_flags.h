#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qtft/common/precision.h"
#include "qtft/model/tft_options.h"
#include "qtft/train/qat_recipe.h"
#include "qtft/train/train_options.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace qtft::cli {

// --activation-bits, as every command that quantizes explains it.
inline constexpr const char* kActivationBitsHelp =
    "Activation bit width: 8, or 7 for exact integer products on CPUs without VNNI";

// Architecture flags; applied to the options built from the data.
using ModelFlags = model::Architecture;

// Where and how computations run.
struct RuntimeFlags {
  std::string device = "auto";
  int threads = 0;  // 0 = LibTorch's default
  bool deterministic = false;
  std::string gpu_memory_limit;  // empty: the whole card
  std::string precision;         // --precision; empty: not given (fp32, or a resumed run's)
  // --precision, or `otherwise` when not given.
  Precision precision_or(Precision otherwise = Precision::Fp32) const;
  // Threads and deterministic algorithms: before any tensor work.
  void apply() const;
  // The device --device names (artifact::resolve_device), --gpu-memory-limit set on it.
  c10::Device resolve_device() const;
  // --gpu-memory-limit, when given, on a device resolved elsewhere (a rank's own GPU).
  void limit_gpu_memory(c10::Device device) const;
};

// Quantization-aware training, as users of the earlier tool know the flags.
// The recipe's fields are the flags; the rest are what the command does with them.
struct QatFlags : train::QatRecipe {
  std::string start_name = "fp32";  // --qat-start, parsed into `start` by finish()
  bool verbose = false;
  bool compare_accuracy = false;
  void finish() { start = train::parse_qat_start(start_name); }
};

// Activation checkpointing, with the flag users of the earlier tool know.
struct CheckpointFlags {
  bool use = false;
  std::string policy;  // empty: not given (blocks when checkpointing)
  std::string memory_budget;
  // Checks the combination and sets the training options' policy and budget.
  void apply_to(train::TrainOptions& options) const;
};

void add_model_flags(CLI::App& cmd, ModelFlags& flags);
void add_checkpoint_flags(CLI::App& cmd, CheckpointFlags& flags);
void add_qat_flags(CLI::App& cmd, QatFlags& flags);
void add_runtime_flags(CLI::App& cmd, RuntimeFlags& flags);
// --precision, for the commands that run a model's products (train, memory-report, evaluate, ...).
void add_precision_flag(CLI::App& cmd, RuntimeFlags& flags);
void add_training_flags(CLI::App& cmd, train::TrainOptions& options, std::string& lr_schedule);

// The check for every option that names a file to write: at parse time, before any work,
// its folder must exist and be writable and it must not be a folder (io::check_writable).
const CLI::Validator& writable_file();

// stdout is a terminal: draw live progress bars instead of log lines.
bool stdout_is_terminal();

}  // namespace qtft::cli
