// `qtft backtest`: the walk forward's flags in, qtft::train::run_backtest, a line per fold and
// the summary across folds printed.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "exit_code.h"
#include "interrupt.h"
#include "model_run.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/device_choice.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/eval/conformal.h"
#include "qtft/train/backtest.h"
#include "train_flags.h"

namespace qtft::cli {
namespace {

struct BacktestFlags {
  TrainFlags train;  // the data, model, QAT and training flags of `qtft train`
  std::string initial_train_until, step, refit = "update", output, int8_kernels = "integer", conformal;
  double conformal_rate = eval::kDefaultConformalRate;
  int64_t initial_train_bars = 0, update_epochs = 1;
  bool int8 = false, keep_models = false, show_epochs = false;
  double cost_bps = 0.0;
};

std::string figure(double x, const char* format = "%.4f") {
  if (!std::isfinite(x)) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

class FoldPrinter : public train::BacktestEvents {
 public:
  explicit FoldPrinter(bool show_epochs)
      : progress_(show_epochs ? train::make_console_progress(stdout, stdout_is_terminal())
                              : std::make_unique<train::ProgressReporter>()) {}
  void planned(const std::vector<train::Fold>& folds, int64_t bars) override {
    folds_ = static_cast<long long>(folds.size());
    std::printf("Walk forward: %lld folds (0 to %lld) over %lld bars, the first trained through %s\n", folds_,
                folds_ - 1, static_cast<long long>(bars), format_utc(folds.front().train_through_ns).c_str());
  }
  void resumed(int64_t finished) override {
    std::printf("Resuming: %lld folds were finished\n", static_cast<long long>(finished));
  }
  void fold_started(const train::Fold& fold, train::FoldModel model) override {
    const std::string what = model == train::FoldModel::Kept
                                 ? "fold 0's model, forecasting the bars after"
                                 : std::string(train::fold_model_name(model)) + " on the bars through";
    std::printf("fold %lld of 0-%lld: %s %s...\n", static_cast<long long>(fold.index), folds_ - 1, what.c_str(),
                format_utc(fold.train_through_ns).c_str());
    std::fflush(stdout);
  }
  void fold_finished(const train::FoldResult& r, int64_t /*folds*/) override {
    const auto& d = r.desk;
    const auto ic = d.ic_pooled.empty() ? eval::InformationCoefficient{NAN, NAN, 0} : d.ic_pooled.front();
    std::printf(
        "  %lld windows out of sample; loss %s, IC %s (t %s), interval coverage %s (nominal %s), hit rate %s; "
        "trained %s s, forecast %s s\n",
        static_cast<long long>(d.windows), figure(r.metrics.loss).c_str(), figure(ic.ic).c_str(),
        figure(ic.t, "%.2f").c_str(), figure(d.interval_coverage, "%.3f").c_str(),
        figure(d.interval_nominal, "%.3f").c_str(), figure(d.hit_rate, "%.3f").c_str(),
        figure(r.training.seconds, "%.1f").c_str(), figure(r.forecast_seconds, "%.1f").c_str());
    if (r.conformal_coverage) {
      std::printf("  %s conformal: interval coverage %s (raw %s), loss in target units %s (raw %s)\n",
                  r.conformal_method.c_str(), figure(r.conformal_coverage->interval, "%.3f").c_str(),
                  figure(r.raw_coverage->interval, "%.3f").c_str(),
                  figure(r.conformal_coverage->loss_in_target_units, "%.4g").c_str(),
                  figure(r.raw_coverage->loss_in_target_units, "%.4g").c_str());
    }
    std::fflush(stdout);
  }
  train::ProgressReporter& training_progress() override { return *progress_; }

 private:
  std::unique_ptr<train::ProgressReporter> progress_;
  long long folds_ = 0;
};

void print_summary(const train::BacktestSummary& summary) {
  const auto line = [&](const char* name, const train::AcrossFolds& s) {
    std::printf("  %-22s mean %s  sd %s", name, figure(s.mean).c_str(), figure(s.sd).c_str());
    if (s.is_signed) {
      std::printf("  t %s  positive in %lld of %lld folds", figure(s.t, "%.2f").c_str(),
                  static_cast<long long>(s.positive_folds), static_cast<long long>(s.folds));
    }
    std::printf("\n");
  };
  std::printf("Across %lld folds (%lld windows):\n", static_cast<long long>(summary.folds),
              static_cast<long long>(summary.windows));
  line("loss", summary.loss);
  line("IC, first step", summary.ic_step1);
  line("interval coverage", summary.interval_coverage);
  if (summary.conformal_interval_coverage.folds > 0) line("  conformal", summary.conformal_interval_coverage);
  line("sign hit rate", summary.hit_rate);
  line("Sharpe", summary.sharpe);
  std::printf("  training %.1f s, forecasting %.1f s\n", summary.train_seconds, summary.forecast_seconds);
}

}  // namespace

void add_backtest_command(CLI::App& app) {
  auto flags = std::make_shared<BacktestFlags>();
  auto* cmd = app.add_subcommand("backtest",
                                 "Walk forward: train to a date, forecast the next step out of sample, refit, repeat");
  add_training_setup_flags(*cmd, flags->train);
  cmd->add_option("--initial-train-until", flags->initial_train_until,
                  "The first fold trains on the bars through this UTC date or time (2024-01-02, 2024-01-02T08:30)");
  cmd->add_option("--initial-train-bars", flags->initial_train_bars,
                  "The first fold trains on the data's first N bars (distinct timestamps over all series)");
  cmd->add_option("--step", flags->step, "How far each fold moves: bars (500) or a duration (30min, 12h, 5d, 2w)")
      ->required();
  cmd->add_option("--refit", flags->refit,
                  "Between folds: none (keep the first model), update (continue it on the new bars, observers "
                  "live) or full (train afresh on every bar so far)")
      ->check(CLI::IsMember({"none", "update", "full"}))
      ->capture_default_str();
  cmd->add_option("--update-epochs", flags->update_epochs, "Epochs of each --refit update")->capture_default_str();
  cmd->add_flag("--int8", flags->int8, "Forecast with each fold's int8 export (a --use-qat model's)");
  add_int8_kernels_flag(*cmd, flags->int8_kernels);
  cmd->add_flag("--keep-models", flags->keep_models,
                "Keep every fold's model in DIR/models (by default only the last fold's stays)");
  cmd->add_option("--cost-bps", flags->cost_bps,
                  "Trading cost of the desk metrics' position, in basis points per unit of position traded")
      ->capture_default_str();
  cmd->add_option("--output", flags->output,
                  "The folder for forecasts.parquet, folds.json and models/; a backtest there resumes")
      ->required();
  cmd->add_flag("--show-epochs", flags->show_epochs, "Print every fold's training epochs");
  cmd->add_option("--conformal", flags->conformal,
                  "Also issue every fold's quantiles with conformal offsets: adaptive (each moved after every "
                  "realized bar, per symbol and step, carried across folds and saved in each fold's model) or split "
                  "(fitted by each fold's model on its validation split as it trains, then fixed)")
      ->check(CLI::IsMember({"adaptive", "split"}));
  auto* rate =
      cmd->add_option("--conformal-rate", flags->conformal_rate,
                      "How far each realized bar moves an adaptive offset, in the target's scaled units, (0, 1]")
          ->capture_default_str();
  cmd->callback([flags, rate] {
    auto& f = *flags;
    install_interrupt_handler();
    train::BacktestOptions o;
    o.setup = interruptible_training_setup(f.train);
    o.source = f.train.data.source;  // as the flags finished it
    if (!f.initial_train_until.empty())
      o.plan.initial_train_until_ns = parse_utc(f.initial_train_until, "--initial-train-until");
    o.plan.initial_train_bars = f.initial_train_bars;
    o.plan.step = train::parse_fold_step(f.step);
    o.refit = train::parse_refit(f.refit);
    o.update_epochs = f.update_epochs;
    o.int8 = f.int8;
    o.int8_kernels = artifact::parse_int8_kernels(f.int8_kernels, "--int8-kernels");
    o.keep_models = f.keep_models;
    o.cost_bps = f.cost_bps;
    o.forecast_batch_size = f.train.train.eval_batch_size;
    o.output = f.output;
    if (f.conformal == "adaptive") {
      o.adaptive_conformal_rate = f.conformal_rate;
    } else if (rate->count() > 0) {
      throw UsageError("--conformal-rate moves adaptive offsets: add --conformal adaptive");
    }
    o.split_conformal = f.conformal == "split";
    FoldPrinter printer(f.show_epochs);
    const auto outcome = train::run_backtest(o, printer);
    const auto finished = static_cast<size_t>(outcome.finished_folds);
    if (outcome.interrupted) {
      std::fprintf(stderr,
                   "\nqtft: interrupted; %zu of %lld folds are finished in %s; run the same command again to go on "
                   "from fold %zu\n",
                   finished, static_cast<long long>(outcome.planned_folds), f.output.c_str(), finished);
      throw ExitCode{130};
    }
    if (outcome.summary) print_summary(*outcome.summary);
    std::printf("Wrote %s and %s\n", outcome.forecasts.string().c_str(), outcome.record.string().c_str());
  });
}

}  // namespace qtft::cli
