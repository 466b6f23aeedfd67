// `qtft tune`: the search's flags in, qtft::train::run_tune, a line per trial and the trials
// table printed.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "exit_code.h"
#include "interrupt.h"
#include "qtft/common/error.h"
#include "qtft/train/tune.h"
#include "train_flags.h"

namespace qtft::cli {
namespace {

struct TuneFlags {
  TrainFlags train;  // the data, model, QAT and training flags of `qtft train`: what no trial changes
  std::string tune_file, output, method = "halving", objective = "loss";
  int64_t trials = 16, eta = 3;
  double random_budget = 0.0;
  uint64_t seed = 1;
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
  void planned(const std::vector<train::Rung>& rungs, int64_t batches) override {
    std::printf("Successive halving's rungs (an epoch is about %lld batches):", static_cast<long long>(batches));
    for (const auto& r : rungs)
      std::printf(" %lld trials at %.3g of the budget;", static_cast<long long>(r.trials), r.budget);
    std::printf("\n");
  }
  void resumed(int64_t runs) override {
    std::printf("Resuming: %lld trial runs are in the journal\n", static_cast<long long>(runs));
  }
  void trial_finished(const train::TrialRun& run) override {
    std::string scored = std::isfinite(run.val_loss) ? std::to_string(run.val_loss) : "failed";
    if (std::isfinite(run.val_loss) && run.objective != run.val_loss) {
      scored += ", IC " + std::to_string(run.ic) + ", coverage " + std::to_string(run.coverage);
    }
    std::printf("trial %3lld rung %lld (%s): validation loss %s  %s  (%.1f s)\n", static_cast<long long>(run.trial),
                static_cast<long long>(run.rung), budget_of(run).c_str(), scored.c_str(), run.options.dump().c_str(),
                run.seconds);
    std::fflush(stdout);
  }
};

}  // namespace

void add_tune_command(CLI::App& app) {
  auto flags = std::make_shared<TuneFlags>();
  auto* cmd =
      app.add_subcommand("tune", "Search model and training options (ranges in a tune file) by successive halving");
  add_training_setup_flags(*cmd, flags->train);
  cmd->add_option("--tune-file", flags->tune_file,
                  "The ranges, as JSON: {\"hidden_size\": [16, 32, 64], \"learning_rate\": {\"min\": 1e-4, \"max\": "
                  "1e-2, \"log\": true}, ...}")
      ->required()
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
  cmd->add_option("--tune-seed", flags->seed, "The random stream the trials' options are drawn from")
      ->capture_default_str();
  cmd->add_option("--output", flags->output,
                  "The folder for journal.json, trials/ and best.safetensors; a search "
                  "there goes on")
      ->required();
  cmd->callback([flags] {
    auto& f = *flags;
    install_interrupt_handler();
    train::TuneOptions o;
    o.base = interruptible_training_setup(f.train);
    o.source = f.train.data.source;  // as the flags finished it
    o.tune_file = f.tune_file;
    o.space = train::read_tune_file(f.tune_file);
    o.trials = f.trials;
    o.eta = f.eta;
    o.method = train::parse_tune_method(f.method);
    o.objective = train::parse_tune_objective(f.objective);
    o.random_budget = f.random_budget;
    o.seed = f.seed;
    o.output = f.output;
    TrialPrinter printer;
    const auto outcome = train::run_tune(o, printer);
    if (outcome.interrupted) {
      std::fprintf(stderr, "\nqtft: interrupted; %zu trial runs are in %s; run the same command again to go on\n",
                   outcome.runs.size(), outcome.journal.string().c_str());
      throw ExitCode{130};
    }
    if (!outcome.best) throw Error("tune: no trial trained (every one failed; see above)");
    std::printf(
        "Best: trial %lld, validation loss %.6f, %s\nSaved %s (the journal: %s); the trials' training took "
        "%.1f s\n",
        static_cast<long long>(outcome.best->trial), outcome.best->val_loss, outcome.best->options.dump().c_str(),
        outcome.best_model.string().c_str(), outcome.journal.string().c_str(), outcome.seconds);
  });
}

}  // namespace qtft::cli
