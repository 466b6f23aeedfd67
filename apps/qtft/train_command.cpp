// `qtft train`: data -> model -> trained model file and metrics. The steps are library
// calls; this file only wires flags to them and prints.
#include <ATen/Parallel.h>
#include <c10/util/Logging.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "commands.h"
#include "data_flags.h"
#include "exit_code.h"
#include "interrupt.h"
#include "local_launch.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/dataset_summary.h"
#include "qtft/dist/collective.h"
#include "qtft/dist/environment.h"
#include "qtft/eval/baselines.h"
#include "qtft/io/atomic_file.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/compare_accuracy.h"
#include "qtft/train/trainer.h"
#include "qtft/train/workflow.h"
#include "run_flags.h"

namespace qtft::data {
// The column flags as a checkpoint records them (keys: the field names).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ColumnNames, timestamp, open, high, low, close, volume, symbol)
}  // namespace qtft::data

namespace qtft::cli {
namespace {

struct TrainFlags {
  DataFlags data;
  ModelFlags model;
  QatFlags qat;
  CheckpointFlags checkpointing;
  RuntimeFlags runtime;
  train::TrainOptions train;
  std::string lr_schedule = "plateau";
  std::string save_model, load_model, metrics_json;
  bool resume = false;
  bool update = false;
  bool epochs_given = false;  // --epochs on the command line (a resumed run keeps its own otherwise)
  int64_t nproc = 1;          // > 1: launch that many local data-parallel workers
  int64_t dist_timeout_s = 300;
};

// What a checkpoint records of the command that made it, so that
// `qtft train --resume --load-model F` alone continues the run.
nlohmann::json run_record(const TrainFlags& f, const std::string& save_path, int64_t ranks) {
  const auto& src = f.data.source;
  auto absolute = [](const std::string& p) { return p.empty() ? p : std::filesystem::absolute(p).string(); };
  return {{"save_model", absolute(save_path)},
          {"ranks", ranks},
          {"data",
           {{"parquet_file", absolute(src.parquet_file)},
            {"csv_file", absolute(src.csv_file)},
            {"columns", src.read.columns},
            {"symbol", src.read.symbol},
            {"timestamp_unit", f.data.timestamp_unit},
            {"feature_store", absolute(src.feature_store)},
            {"in_memory", src.in_memory}}}};
}

// --resume: what the command line leaves out comes from the checkpoint's record: the data,
// the save path and the epoch budget of the original run. Returns the checkpoint, read once.
artifact::ModelFile continue_recorded_run(TrainFlags& f, bool print, int64_t ranks) {
  auto file = artifact::load_model_file(f.load_model);
  if (!file.training) throw Error(f.load_model + ": holds no training state to --resume from");
  const auto& record = file.training->run;
  try {
    if (!f.epochs_given && file.training->config.contains("epochs")) {
      f.train.epochs = file.training->config.at("epochs").get<int64_t>();
    }
    if (f.save_model.empty() && record.contains("save_model"))
      f.save_model = record.at("save_model").get<std::string>();
    if (f.data.source.uses_embedded_data() && record.contains("data")) {
      const auto& d = record.at("data");
      auto& src = f.data.source;
      src.parquet_file = d.at("parquet_file").get<std::string>();
      src.csv_file = d.at("csv_file").get<std::string>();
      src.read.columns = d.at("columns").get<data::ColumnNames>();
      src.read.symbol = d.at("symbol").get<std::string>();
      f.data.timestamp_unit = d.at("timestamp_unit").get<std::string>();
      // Records written before feature stores existed have neither.
      src.feature_store = d.value("feature_store", std::string());
      src.in_memory = d.value("in_memory", false);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(f.load_model + ": malformed record of the run to resume: " + e.what());
  }
  if (!f.save_model.empty()) io::check_writable(f.save_model, "--save-model (from the checkpoint)");
  // The batches that come next depend on how many ranks share each step.
  const int64_t saved_ranks = record.value("ranks", int64_t{1});
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

// Saves with Ctrl-C held back, so a signal cannot leave a half-written temporary behind; a
// signal that came meanwhile is acted on once the file is in place.
void save_whole(const std::string& path, const artifact::ModelFile& file) {
  SignalsHeld held;
  artifact::save_model_file(path, file);
}

constexpr const char* kInterruptedFile = "qtft-interrupted.safetensors";

void print_config(const model::TftOptions& m, const train::TrainOptions& t, int64_t parameters, c10::Device device) {
  std::string q;
  for (double v : m.quantiles()) q += (q.empty() ? "" : ",") + std::to_string(v).substr(0, 4);
  std::printf("Model: TFT hidden %lld, heads %lld, lstm layers %lld, dropout %.2f, quantiles %s; %lld parameters\n",
              static_cast<long long>(m.hidden_size()), static_cast<long long>(m.attention_heads()),
              static_cast<long long>(m.lstm_layers()), m.dropout(), q.c_str(), static_cast<long long>(parameters));
  std::printf(
      "Training: %lld epochs, batch %zu, Adam lr %g, weight decay %g, clip %g, schedule %s, patience %lld, "
      "seed %llu, device %s\n",
      static_cast<long long>(t.epochs), t.batch_size, t.learning_rate, t.weight_decay, t.clip_norm,
      train::lr_schedule_name(t.lr_schedule), static_cast<long long>(t.patience),
      static_cast<unsigned long long>(t.seed), device.str().c_str());
  if (t.checkpoint_policy != memory::CheckpointPolicy::None) {
    std::string what = "the same numbers as without, bit for bit; less memory, more time";
    if (t.checkpoint_policy == memory::CheckpointPolicy::Auto) {
      what = std::string("the least recomputation whose step fits ")
                 .append(format_bytes(static_cast<uint64_t>(t.memory_budget_bytes)));
    }
    std::printf("Activation checkpointing: %s (%s)\n", memory::checkpoint_policy_name(t.checkpoint_policy),
                what.c_str());
  }
  if (m.use_qat()) {
    std::printf(
        "QAT: weights %lld-bit per channel (symmetric), activations %lld-bit per tensor (moving-average "
        "observers, constant %g)\n",
        static_cast<long long>(m.weight_bits()), static_cast<long long>(m.activation_bits()), m.observer_averaging());
  }
}

// The workflow's events, printed as the run goes.
class ConsolePrinter : public train::TrainingEvents {
 public:
  ConsolePrinter(const data::BarSource& source, bool verbose_observers, c10::Device device)
      : source_(source), verbose_(verbose_observers), device_(device) {}
  void model_loaded(const std::filesystem::path& path) override {
    std::cout << "Loaded " << path.string() << " (its configuration, features and windows are kept)\n";
  }
  void feature_store_ready(const data::StorePreparation& store) override { print_store(store); }
  void data_ready(const data::Dataset& dataset) override {
    std::cout << "Data: " << data::describe_source(source_) << "\n" << data::summarize_dataset(dataset);
  }
  void model_ready(const model::TemporalFusionTransformer& model, const train::TrainOptions& train) override {
    print_config(model->options(), train, model::count_parameters(*model.ptr()), device_);
  }
  void calibration_started(int64_t batches) override {
    std::printf("Starting QAT calibration (%lld batches)...\n", static_cast<long long>(batches));
    std::fflush(stdout);
  }
  void calibration_finished(const model::TemporalFusionTransformer& model,
                            const data::RegimeCoverage& coverage) override {
    std::printf("Calibration complete\nObserver statistics:\n%s%s",
                quant::format_observer_table(quant::observer_stats(*model.ptr()), verbose_ ? 0 : 12).c_str(),
                data::format_regime_coverage(coverage).c_str());
    calibration_coverage = coverage;
  }
  void observers_frozen(size_t observers) override {
    std::printf("QAT observers frozen (%zu observers; scales and zero points fixed)\n", observers);
  }
  void baselines_ready(const eval::BaselineMetrics& b) override {
    std::printf("Baselines on validation: zero-return loss %.5f, training quantiles loss %.5f (best: %s)\n",
                b.zero.loss, b.empirical.loss, b.best_name().c_str());
  }
  void two_phase_planned(const train::TwoPhasePlan& plan) override { std::printf("%s\n", plan.describe().c_str()); }
  void qat_phase_started(const train::TwoPhasePlan& plan, int64_t fp32_best_epoch) override {
    std::printf(
        "FP32 phase done (best epoch %lld); QAT phase: those weights fake-quantized at %lld-bit weights, "
        "%lld-bit activations, learning rate %g\n",
        static_cast<long long>(fp32_best_epoch), static_cast<long long>(plan.weight_bits),
        static_cast<long long>(plan.activation_bits), plan.learning_rate);
    std::fflush(stdout);
  }
  void update_planned(const train::UpdateOrigin& update) override {
    std::printf("Update of %s: new bars after those it trained on\n", update.parent.c_str());
    for (const auto& a : update.added) {
      std::printf("  %s: %s to %s\n", a.symbol.c_str(), format_utc(a.first_bar_ns).c_str(),
                  format_utc(a.last_bar_ns).c_str());
    }
  }
  void resumed(const artifact::TrainingState& st) override {
    std::printf("Resuming after epoch %lld, batch %lld (step %lld)\n", static_cast<long long>(st.epochs_completed),
                static_cast<long long>(st.batches_done_in_epoch), static_cast<long long>(st.global_step));
  }

  // The last calibration's, for --metrics-json.
  std::optional<data::RegimeCoverage> calibration_coverage;

 private:
  const data::BarSource& source_;
  bool verbose_;
  c10::Device device_;
};

// The comparison's recipe in words, checked before any data loads (UsageError naming flags).
std::string comparison_budget(const TrainFlags& f) {
  auto recipe = static_cast<train::QatRecipe>(f.qat);
  recipe.two_phase = true;
  const auto plan = train::plan_two_phase(recipe, f.train, /*fp32_loaded=*/false);
  const auto epochs = std::to_string(f.train.epochs);
  if (!plan) return "every model trains " + epochs + " epochs (QAT from scratch)";
  return "every model has " + epochs + " epochs: QAT takes over the FP32 run after " +
         std::to_string(plan->fp32_epochs) + " and fine-tunes for " + std::to_string(plan->qat_epochs);
}

void run_compare_accuracy(const TrainFlags& f) {
  comparison_budget(f);  // flags before data
  auto device = artifact::resolve_device(f.runtime.device);
  const auto& source = f.data.source;
  if (source.uses_embedded_data()) {
    std::cout << "No --parquet-file or --csv-file given: comparing on the " << data::describe_source(source) << "\n";
  }
  auto shared_dataset = std::make_shared<const data::Dataset>(
      data::open_dataset(source, f.data.dataset, nullptr, data::StoreAccess::BuildIfNeeded, print_store));
  const auto& dataset = *shared_dataset;
  // Every model of the comparison has this architecture; the QAT rows set their own bits.
  const auto options = model::model_options_for(dataset, f.model, false, f.qat.weight_bits, f.qat.activation_bits);
  train::CompareOptions compare{options, f.train, f.qat, device};
  compare.train.freeze_observers_after_epochs = 0;
  print_config(options, f.train, model::count_parameters(*model::TemporalFusionTransformer(options)), device);
  std::printf(
      "Comparing FP32, PTQ, QAT (two-phase, frozen) and QAT (live) at %lld-bit weights, %lld-bit activations; "
      "%s\n",
      static_cast<long long>(f.qat.weight_bits), static_cast<long long>(f.qat.activation_bits),
      comparison_budget(f).c_str());
  auto progress = train::make_console_progress(stdout, stdout_is_terminal());
  auto rows = train::compare_accuracy(
      shared_dataset, compare, *progress,
      [](const std::string& line) {
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
      },
      interrupt_requested);
  std::printf("\nAccuracy comparison (validation split, best epoch of each):\n%s",
              train::format_comparison(rows).c_str());
  if (!f.metrics_json.empty()) {
    nlohmann::json j{{"config",
                      {{"model", model::to_json(options)},
                       {"training", train::to_json(f.train)},
                       {"weight_bits", f.qat.weight_bits},
                       {"activation_bits", f.qat.activation_bits},
                       {"calibration_batches", f.qat.calibration_batches},
                       {"qat_live_epochs", f.qat.live_epochs},
                       {"data", data::describe_source(source)}}},
                     {"models", train::to_json(rows)}};
    io::write_file_atomically(f.metrics_json, j.dump(2) + "\n");
  }
}

// The run the flags ask for; the device, the group and a checkpoint read already are the
// caller's to add.
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

// The checks a launcher can make before starting workers, so that a bad flag is reported
// once, not by every worker; each worker makes them again.
void finish_train_flags(TrainFlags& f) {
  finish_data_flags(f.data);
  f.runtime.apply();
  f.train.lr_schedule = train::parse_lr_schedule(f.lr_schedule);
  f.checkpointing.apply_to(f.train);
  f.qat.finish();
  if (f.qat.compare_accuracy && (!f.load_model.empty() || f.resume)) {
    throw UsageError("--compare-accuracy trains every model itself, FP32 first: drop --load-model");
  }
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
  return std::make_shared<dist::Collective>(dist::Collective::connect(*env, timeout));
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
  auto device = artifact::resolve_device(f.runtime.device);
  if (group && device.is_cuda()) {
    if (f.runtime.device != "auto") {
      throw UsageError("--device cuda: data-parallel training runs on CPU (Gloo) for now; NCCL is not built yet");
    }
    device = c10::Device(c10::kCPU);
  }
  auto setup = training_setup(f);
  setup.model_file = std::move(checkpoint);
  setup.device = device;
  setup.group = group;
  train::check_training_setup(setup);  // flags before data
  // Two runs saving to one file would overwrite each other's work: the second stops here.
  // (Without --save-model only an interrupt writes, to the default checkpoint name.)
  std::optional<io::OutputLock> lock;
  if (leader && !f.save_model.empty()) lock.emplace(f.save_model);
  if (group && leader) {
    const int threads = at::get_num_threads();
    std::printf(
        "Data parallel: %lld ranks (Gloo), %d thread%s each; every step takes %zu windows per rank, %zu in "
        "all\n",
        static_cast<long long>(ranks), threads, threads == 1 ? "" : "s", f.train.batch_size,
        f.train.batch_size * static_cast<size_t>(ranks));
  }

  const auto& source = f.data.source;
  if (leader && source.uses_embedded_data()) {
    std::cout << "No --parquet-file or --csv-file given: training on the " << data::describe_source(source) << "\n";
  }
  ConsolePrinter printer(source, f.qat.verbose, setup.device);
  train::TrainingEvents quiet;
  setup.stop_requested = interrupt_requested;
  auto run = [&] {
    try {
      return train::prepare_training(source, setup, leader ? printer : quiet);
    } catch (const train::Interrupted& e) {
      if (leader) std::fprintf(stderr, "\nqtft: %s\n", e.what());
      throw ExitCode{130};
    }
  }();
  f.train = run.train;
  auto& model = run.model;
  const auto& baselines = run.baselines;
  const auto parameters = model::count_parameters(*model);

  auto progress =
      leader ? train::make_console_progress(stdout, stdout_is_terminal()) : std::make_unique<train::ProgressReporter>();
  auto result = train::fit_training(run, *progress, leader ? static_cast<train::TrainingEvents&>(printer) : quiet,
                                    interrupt_requested);
  // The other ranks wait until rank 0's files are complete: a launcher that sees one
  // worker end may stop the rest.
  auto files_written = [&] {
    if (group) group->barrier();
  };

  auto out = train::training_model_file(run);
  out.training->run = run_record(f, f.save_model, ranks);
  const auto& state = *out.training;
  if (result.interrupted) {
    if (!leader) {
      files_written();
      throw ExitCode{130};
    }
    std::string path = f.save_model.empty() ? kInterruptedFile : f.save_model;
    save_whole(path, out);
    files_written();
    std::fprintf(stderr,
                 "\nqtft: interrupted after epoch %lld, batch %lld: saved a resumable checkpoint to %s\n"
                 "continue with: qtft train --resume --load-model %s\n"
                 "(the data, the %lld epochs and the save path come from the checkpoint; flags given override them)\n",
                 static_cast<long long>(state.epochs_completed), static_cast<long long>(state.batches_done_in_epoch),
                 path.c_str(), path.c_str(), static_cast<long long>(f.train.epochs));
    if (group) {
      const auto n = static_cast<long long>(ranks);
      std::fprintf(stderr,
                   "(on %lld ranks, as this run: add --nproc %lld, or launch it with torchrun --nproc-per-node "
                   "%lld --no-python)\n",
                   n, n, n);
    }
    throw ExitCode{130};
  }

  if (!leader) {
    files_written();
    return;
  }
  // Report the best epoch's model, which is also what the file holds.
  artifact::copy_weights_into(*model, out.weights, "best weights");
  const auto& best = result.best_val;
  const double baseline = baselines.best().loss;
  std::printf(
      "Summary: best epoch %lld of %lld%s; validation loss %.5f vs best naive baseline %.5f (%s): %s by %.1f%%; "
      "RMSE %.5f, MAE %.5f, P50 %.4f, P90 %.4f; %lld parameters; %.1f s\n",
      static_cast<long long>(result.best_epoch), static_cast<long long>(result.epochs_completed),
      result.stopped_early ? " (stopped early)" : "", best.loss, baseline, baselines.best_name().c_str(),
      best.loss < baseline ? "better" : "WORSE", 100.0 * std::abs(baseline - best.loss) / baseline, best.rmse, best.mae,
      best.p50, best.p90, static_cast<long long>(parameters), result.train_seconds);
  if (!f.save_model.empty()) {
    save_whole(f.save_model, out);
    std::cout << "Saved " << f.save_model << "\n";
  }
  if (!f.metrics_json.empty()) {
    nlohmann::json j{{"config",
                      {{"model", model::to_json(model->options())},
                       {"training", train::to_json(f.train)},
                       {"data", data::describe_source(source)}}},
                     {"epochs", state.history},
                     {"best_epoch", result.best_epoch},
                     {"val_loss", best.loss},
                     {"val_rmse", best.rmse},
                     {"val_mae", best.mae},
                     {"val_p50", best.p50},
                     {"val_p90", best.p90},
                     {"baseline_val_loss", baseline},
                     {"baselines", eval::to_json(baselines)},
                     {"parameters", parameters},
                     {"train_seconds", result.train_seconds},
                     {"stopped_early", result.stopped_early}};
    if (printer.calibration_coverage) j["calibration_coverage"] = data::to_json(*printer.calibration_coverage);
    io::write_file_atomically(f.metrics_json, j.dump(2) + "\n");
  }
  files_written();
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
  add_bar_source_flags(*cmd, flags->data);
  add_window_flags(*cmd, flags->data);
  add_model_flags(*cmd, flags->model);
  add_qat_flags(*cmd, flags->qat);
  add_checkpoint_flags(*cmd, flags->checkpointing);
  add_training_flags(*cmd, flags->train, flags->lr_schedule);
  add_runtime_flags(*cmd, flags->runtime);
  cmd->add_option("--save-model", flags->save_model, "Write the best model and training state (.safetensors)")
      ->check(writable_file());
  cmd->add_option("--load-model", flags->load_model, "Start from a saved model (fine-tune or --resume)")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--resume", flags->resume, "Continue the --load-model run exactly: optimizer, epoch, batch, RNG");
  cmd->add_flag("--update", flags->update,
                "Continue the --load-model model on the bars after those it trained on (the newest validate), "
                "observers live");
  cmd->add_option("--metrics-json", flags->metrics_json, "Write configuration, per-epoch metrics and summary")
      ->check(writable_file());
  cmd->add_option("--nproc", flags->nproc,
                  "Train data-parallel with this many local worker processes (as torchrun --nproc-per-node "
                  "would); --batch-size is per worker")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--dist-timeout", flags->dist_timeout_s,
                  "Seconds a data-parallel rank waits for the others (rendezvous, every collective) before failing")
      ->capture_default_str();
  cmd->callback([flags, cmd] {
    flags->epochs_given = cmd->count("--epochs") > 0;
    run_train(*flags);
  });
}

}  // namespace qtft::cli
