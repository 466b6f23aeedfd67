// `qtft tune`: the search's flags in, qtft::train::run_tune, a line per trial and the trials
// table printed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "exit_code.h"
#include "interrupt.h"
#include "local_launch.h"
#include "qtft/common/error.h"
#include "qtft/dist/environment.h"
#include "qtft/dist/local_workers.h"
#include "qtft/infer/tune_report.h"
#include "qtft/io/atomic_file.h"
#include "qtft/train/lr_range_test.h"
#include "qtft/train/tune.h"
#include "train_flags.h"

namespace qtft::cli {
namespace {

struct TuneFlags {
  TrainFlags train;  // the data, model, QAT and training flags of `qtft train`: what no trial changes
  std::string tune_file, output, method = "halving", objective = "loss";
  int64_t trials = 16, eta = 3, nproc = 1;
  double random_budget = 0.0, time_budget = 0.0;
  uint64_t seed = 1;
  bool find_lr = false;
  train::LrRangeOptions lr_range;
};

std::string budget_of(const train::TrialRun& run) {
  char buf[64];
  if (run.max_batches_per_epoch > 0) {
    std::snprintf(buf, sizeof buf, "%lld batches", static_cast<long long>(run.max_batches_per_epoch * run.epochs));
  } else {
    std::snprintf(buf, sizeof buf, "%lld epochs", static_cast<long long>(run.epochs));
  }
  return buf;
}

class TrialPrinter : public train::TuneEvents {
 public:
  // Side by side, each worker's lines name it.
  explicit TrialPrinter(std::string prefix) : prefix_(std::move(prefix)) {}
  void planned(const std::vector<train::Rung>& rungs, int64_t batches) override {
    std::printf("%sSuccessive halving's rungs (an epoch is about %lld batches):", prefix_.c_str(),
                static_cast<long long>(batches));
    for (const auto& r : rungs)
      std::printf(" %lld trials at %.3g of the budget;", static_cast<long long>(r.trials), r.budget);
    std::printf("\n");
  }
  void resumed(int64_t runs) override {
    std::printf("%sResuming: %lld trial runs are in the journals\n", prefix_.c_str(), static_cast<long long>(runs));
  }
  void feature_store_ready(const data::StorePreparation& store) override { print_store(store); }
  void trial_finished(const train::TrialRun& run) override {
    std::string scored = std::isfinite(run.val_loss) ? std::to_string(run.val_loss) : "failed";
    if (std::isfinite(run.val_loss) && run.objective != run.val_loss) {
      scored += ", IC " + std::to_string(run.ic) + ", coverage " + std::to_string(run.coverage);
    }
    std::printf("%strial %3lld rung %lld (%s): validation loss %s  %s  (%.1f s)\n", prefix_.c_str(),
                static_cast<long long>(run.trial), static_cast<long long>(run.rung), budget_of(run).c_str(),
                scored.c_str(), run.options.dump().c_str(), run.seconds);
    std::fflush(stdout);
  }

 private:
  std::string prefix_;
};

// `--find-lr`: the range test on the base setup, its curve written beside the search's
// files and its suggestion printed.
void find_learning_rate(const TuneFlags& f, const train::TuneOptions& o) {
  train::TrainingEvents quiet;
  std::printf("Learning-rate range test: %lld steps from %.3g to %.3g\n", static_cast<long long>(f.lr_range.steps),
              f.lr_range.min_learning_rate, f.lr_range.max_learning_rate);
  std::fflush(stdout);
  const auto result = train::find_learning_rate(o.source, o.base, f.lr_range, quiet);
  const auto document = train::to_json(result, f.lr_range);
  std::filesystem::create_directories(o.output);
  const auto json_path = o.output / "lr_find.json", page_path = o.output / "lr_find.html";
  io::write_file_atomically(json_path, document.dump(2) + "\n");
  io::write_file_atomically(page_path, infer::lr_range_page(document, "Learning-rate range test"));
  // The curve in a dozen rows: the rate and the loss's moving average.
  const size_t n = result.points.size();
  if (n > 0) std::printf("  %15s  loss (moving average)\n", "rate");
  for (size_t k = 0; k < 12 && n > 0; ++k) {
    const auto& p = result.points[k * (n - 1) / 11];
    std::printf("  %15.3g  %.5f\n", p.learning_rate, p.smoothed);
  }
  if (result.diverged) std::printf("The loss ran away after %zu steps; the sweep stopped there.\n", n);
  if (std::isfinite(result.suggested)) {
    std::printf("Suggested learning rate: %.3g (where the smoothed loss falls fastest; it was lowest at %.3g)\n",
                result.suggested, result.lowest_loss_rate);
  } else {
    std::printf("No suggestion: the sweep took too few steps to tell\n");
  }
  std::printf("Wrote %s and %s (%.1f s)\n", json_path.string().c_str(), page_path.string().c_str(), result.seconds);
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto flags = std::make_shared<TuneFlags>();
  auto* cmd =
      app.add_subcommand("tune", "Search model and training options (ranges in a tune file) by successive halving");
  add_training_setup_flags(*cmd, flags->train);
  cmd->add_option("--tune-file", flags->tune_file,
                  "The ranges, as JSON: {\"hidden_size\": [16, 32, 64], \"learning_rate\": {\"min\": 1e-4, \"max\": "
                  "1e-2, \"log\": true}, ...}")
      ->check(CLI::ExistingFile);
  cmd->add_option("--trials", flags->trials, "Trials drawn from the ranges")->capture_default_str();
  cmd->add_option("--eta", flags->eta,
                  "Successive halving: each rung keeps 1/eta of its trials on eta times the budget")
      ->capture_default_str();
  cmd->add_option("--method", flags->method,
                  "halving, or random: every trial on one budget (the one halving spends, shared; the baseline)")
      ->check(CLI::IsMember({"halving", "random"}))
      ->capture_default_str();
  cmd->add_option("--objective", flags->objective,
                  "What ranks the trials on the validation split: loss, ic (the median's, first step) or coverage "
                  "(the central interval's distance from its nominal level)")
      ->check(CLI::IsMember({"loss", "ic", "coverage"}))
      ->capture_default_str();
  cmd->add_option("--random-budget", flags->random_budget,
                  "random: each trial's share of the full budget (0: what halving would spend per trial)")
      ->capture_default_str();
  cmd->add_option("--time-budget", flags->time_budget,
                  "Seconds of training the search may spend (0: none; with --nproc, the trials' seconds divided by the "
                  "workers); out of time, the best of the furthest rung reached wins")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--nproc", flags->nproc,
                  "Train this many trials side by side, each in a worker process of its own (the cores shared)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--find-lr", flags->find_lr,
                "Instead of a search: the learning-rate range test on the train flags' setup; writes "
                "lr_find.json and lr_find.html to --output and suggests a rate");
  cmd->add_option("--find-lr-min", flags->lr_range.min_learning_rate, "--find-lr: the first rate")
      ->capture_default_str();
  cmd->add_option("--find-lr-max", flags->lr_range.max_learning_rate, "--find-lr: the last rate")
      ->capture_default_str();
  cmd->add_option("--find-lr-steps", flags->lr_range.steps, "--find-lr: the steps (one batch each)")
      ->capture_default_str();
  cmd->add_option("--tune-seed", flags->seed, "The random stream the trials' options are drawn from")
      ->capture_default_str();
  cmd->add_option("--output", flags->output,
                  "The folder for journal.json, trials/ and best.safetensors; a search "
                  "there goes on")
      ->required();
  cmd->callback([flags] {
    auto& f = *flags;
    const auto worker = dist::distributed_environment();
    if (f.nproc > 1 && worker) {
      throw UsageError("--nproc starts workers of its own: leave it out under torchrun (WORLD_SIZE is set)");
    }
    if (f.nproc > 1 && f.find_lr) throw UsageError("--find-lr is one short run: drop --nproc");
    if (f.nproc > 1) {
      // This process only starts the workers (this command line less --nproc) and waits;
      // Ctrl-C is passed on to them, and they stop where a search stops.
      if (f.tune_file.empty()) throw UsageError("tune: --tune-file is required (or --find-lr for the range test)");
      train::read_tune_file(f.tune_file);  // a bad file is refused once, here
      install_interrupt_counter();
      throw ExitCode{run_as_local_workers(f.nproc, std::chrono::seconds(30))};
    }
    install_interrupt_handler();
    stop_when_the_launcher_dies();
    train::TuneOptions o;
    if (worker) {
      o.workers = worker->world_size;
      o.worker = worker->rank;
      o.launch = dist::process_environment(dist::kLauncherPidVariable).value_or("torchrun") + ":" +
                 std::to_string(worker->master_port);
    }
    o.base = interruptible_training_setup(f.train);
    o.source = f.train.data.source;  // as the flags finished it
    o.output = f.output;
    if (f.find_lr) {
      find_learning_rate(f, o);
      return;
    }
    if (f.tune_file.empty()) throw UsageError("tune: --tune-file is required (or --find-lr for the range test)");
    o.tune_file = f.tune_file;
    o.space = train::read_tune_file(f.tune_file);
    o.trials = f.trials;
    o.eta = f.eta;
    o.method = train::parse_tune_method(f.method);
    o.objective = train::parse_tune_objective(f.objective);
    o.random_budget = f.random_budget;
    o.seed = f.seed;
    o.time_budget_seconds = f.time_budget;
    TrialPrinter printer(o.workers > 1 ? "[worker " + std::to_string(o.worker) + "] " : "");
    const auto outcome = train::run_tune(o, printer);
    if (outcome.interrupted) {
      std::fprintf(stderr, "\nqtft: interrupted; %zu trial runs are in %s; run the same command again to go on\n",
                   outcome.runs.size(), outcome.journal.string().c_str());
      throw ExitCode{130};
    }
    if (o.worker != 0) return;  // the first worker reports the search
    if (!outcome.best) throw Error("tune: no trial trained (every one failed; see above)");
    if (outcome.out_of_time) {
      std::printf("The time budget (%.0f s) ended the search at rung %lld; a larger --time-budget goes on\n",
                  f.time_budget, static_cast<long long>(outcome.best->rung));
    }
    std::printf(
        "Best: trial %lld, validation loss %.6f, %s\nSaved %s (the journal: %s); the trials' training took "
        "%.1f s\n",
        static_cast<long long>(outcome.best->trial), outcome.best->val_loss, outcome.best->options.dump().c_str(),
        outcome.best_model.string().c_str(), outcome.journal.string().c_str(), outcome.seconds);
  });
}

}  // namespace qtft::cli
