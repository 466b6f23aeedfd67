#include "train_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "interrupt.h"
#include "qtft/artifact/model_file.h"
#include "qtft/common/error.h"
#include "qtft/io/atomic_file.h"

namespace qtft::cli {

void add_training_setup_flags(CLI::App& cmd, TrainFlags& f) {
  add_bar_source_flags(cmd, f.data);
  add_input_flags(cmd, f.data);
  add_window_flags(cmd, f.data);
  add_model_flags(cmd, f.model);
  add_qat_flags(cmd, f.qat);
  add_checkpoint_flags(cmd, f.checkpointing);
  add_training_flags(cmd, f.train, f.lr_schedule);
  add_runtime_flags(cmd, f.runtime);
  add_precision_flag(cmd, f.runtime);
}

void add_train_flags(CLI::App& cmd, TrainFlags& f) {
  add_training_setup_flags(cmd, f);
  cmd.add_option("--observer-update", f.observer_update,
                 "When live QAT observers take a batch in: immediate (in every forward), step (once, at the step's "
                 "end, with the step's extremes over all ranks in one collective) or auto (step across ranks, "
                 "immediate alone)")
      ->check(CLI::IsMember({"auto", "immediate", "step"}))
      ->capture_default_str();
  cmd.add_option("--save-model", f.save_model, "Write the best model and training state (.safetensors)")
      ->check(writable_file());
  cmd.add_option("--load-model", f.load_model, "Start from a saved model (fine-tune or --resume)")
      ->check(CLI::ExistingFile);
  cmd.add_flag("--resume", f.resume, "Continue the --load-model run exactly: optimizer, epoch, batch, RNG");
  cmd.add_flag("--update", f.update,
               "Continue the --load-model model on the bars after those it trained on (the newest validate), "
               "observers live");
  cmd.add_option("--metrics-json", f.metrics_json, "Write configuration, per-epoch metrics and summary")
      ->check(writable_file());
  cmd.add_option("--conformal", f.conformal,
                 "Fit conformal offsets on the validation split (split: per step and level, conformalized quantile "
                 "regression) and save them with the model, for forecast --conformal split")
      ->check(CLI::IsMember({"split"}));
  cmd.add_option("--nproc", f.nproc,
                 "Train data-parallel with this many local worker processes (as torchrun --nproc-per-node "
                 "would); --batch-size is per worker")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--dist-timeout", f.dist_timeout_s,
                 "Seconds a data-parallel rank waits for the others (rendezvous, every collective) before failing")
      ->capture_default_str();
}

train::RunRecord run_record(const TrainFlags& f) {
  const auto& src = f.data.source;
  auto absolute = [](const std::string& p) { return p.empty() ? p : std::filesystem::absolute(p).string(); };
  train::RunRecord r;
  r.parquet_file = absolute(src.parquet_file);
  r.csv_file = absolute(src.csv_file);
  r.columns = src.read.columns;
  r.symbol = src.read.symbol;
  r.timestamp_unit = f.data.timestamp_unit;
  r.feature_store = absolute(src.feature_store);
  r.in_memory = src.in_memory;
  return r;
}

artifact::ModelFile continue_recorded_run(TrainFlags& f, bool print, int64_t ranks) {
  auto file = artifact::load_model_file(f.load_model);
  if (!file.training) throw Error(f.load_model + ": holds no training state to --resume from");
  const auto record = train::run_record_from_json(file.training->run, f.load_model);
  try {
    if (!f.epochs_given && file.training->config.contains("epochs")) {
      f.train.epochs = file.training->config.at("epochs").get<int64_t>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(f.load_model + ": malformed record of the run to resume: " + e.what());
  }
  if (f.save_model.empty()) f.save_model = record.save_model;
  if (f.data.source.uses_embedded_data() && file.training->run.contains("data")) {
    auto& src = f.data.source;
    src.parquet_file = record.parquet_file;
    src.csv_file = record.csv_file;
    src.read.columns = record.columns;
    src.read.symbol = record.symbol;
    f.data.timestamp_unit = record.timestamp_unit;
    src.feature_store = record.feature_store;
    src.in_memory = record.in_memory;
  }
  if (!f.save_model.empty()) io::check_writable(f.save_model, "--save-model (from the checkpoint)");
  // The precision decides the bits of every step to come: a resume keeps the run's.
  // Read as --resume reads the run's options (FP32 for a file saved before qtft kept one).
  const std::string saved_precision =
      precision_name(train::train_options_from_json(file.training->config, f.train).precision);
  if (!f.runtime.precision.empty() && f.runtime.precision != saved_precision) {
    throw UsageError("--precision " + f.runtime.precision + ": " + f.load_model + " was trained in " + saved_precision +
                     " and resumes in it; drop --precision or give --precision " + saved_precision);
  }
  // The batches that come next depend on how many ranks share each step.
  const int64_t saved_ranks = record.ranks;
  if (print && saved_ranks != ranks) {
    std::fprintf(stderr,
                 "qtft: note: %s was saved by a run on %lld rank(s) and continues on %lld: from here on the batches "
                 "differ from those of the run never stopped\n",
                 f.load_model.c_str(), static_cast<long long>(saved_ranks), static_cast<long long>(ranks));
  }
  if (print)
    std::cout << "Continuing the run of " << f.load_model << ": " << f.train.epochs << " epochs"
              << (f.save_model.empty() ? "" : ", saving to " + f.save_model) << "\n";
  return file;
}

train::TrainingSetup training_setup(const TrainFlags& f) {
  train::TrainingSetup setup;
  setup.dataset = f.data.dataset;
  setup.architecture = f.model;
  setup.qat = f.qat;
  setup.train = f.train;
  setup.load_model = f.load_model;
  setup.resume = f.resume;
  setup.update = f.update;
  return setup;
}

train::TrainingSetup interruptible_training_setup(TrainFlags& f) {
  finish_train_flags(f);
  auto setup = training_setup(f);
  setup.device = f.runtime.resolve_device();
  setup.stop_requested = interrupt_requested;
  return setup;
}

void finish_train_flags(TrainFlags& f) {
  finish_data_flags(f.data);
  f.runtime.apply();
  f.train.lr_schedule = train::parse_lr_schedule(f.lr_schedule);
  f.train.observer_update = train::parse_observer_update(f.observer_update);
  f.train.precision = f.runtime.precision_or(Precision::Fp32);
  // The card a run is limited to is the budget --checkpoint-policy auto fits, unless given.
  if (f.checkpointing.policy == "auto" && f.checkpointing.memory_budget.empty()) {
    f.checkpointing.memory_budget = f.runtime.gpu_memory_limit;
  }
  f.checkpointing.apply_to(f.train);
  f.qat.finish();
  if (f.qat.compare_accuracy && (!f.load_model.empty() || f.resume)) {
    throw UsageError("--compare-accuracy trains every model itself, FP32 first: drop --load-model");
  }
}

}  // namespace qtft::cli
