#pragma once

// The walk-forward backtest (`qtft backtest`): train on the bars up to a date, forecast every
// window of the next step out of sample, move forward, refit (continue the model on the new
// bars, retrain it, or leave it), repeat. Each fold's forecasts and metrics go into an
// output folder as they finish, so that a stopped backtest resumes from its last finished
// fold and ends exactly as an uninterrupted one would.

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qtft/artifact/int8_kernels.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/eval/conformal.h"
#include "qtft/eval/desk_metrics.h"
#include "qtft/eval/metrics.h"
#include "qtft/train/progress.h"
#include "qtft/train/trainer.h"
#include "qtft/train/workflow.h"

namespace qtft::train {

// What happens to the model between folds: nothing, an update on the bars since the last
// fold (observers live, `qtft train --update`), or training afresh on every bar so far.
enum class Refit { None, Update, Full };
Refit parse_refit(const std::string& name);  // none | update | full; else UsageError naming --refit
const char* refit_name(Refit refit);

// How far each fold moves: a number of the data's bars (its distinct timestamps over every
// series) or a duration. Exactly one is positive.
struct FoldStep {
  int64_t bars = 0;
  int64_t duration_ns = 0;
};
// "500" or "500bars" for bars; "30min", "12h", "5d", "2w" for a duration. Throws
// UsageError naming --step.
FoldStep parse_fold_step(const std::string& text);
std::string describe_fold_step(const FoldStep& step);

// Fold k trains on the bars through `train_through_ns` (its model's data) and forecasts
// every window whose last encoder bar lies in [train_through_ns, forecast_until_ns): each
// forecast bar comes after what the model trained on.
struct Fold {
  int64_t index = 0;
  int64_t train_through_ns = 0;
  int64_t forecast_until_ns = std::numeric_limits<int64_t>::max();  // the last fold: the data's end
  int64_t bars = 0;  // the data's bars in [train_through_ns, forecast_until_ns)
};

// The windows of `dataset`'s Split::All whose last encoder bar lies in [from, until): a
// fold's, with from = train_through_ns and until = forecast_until_ns.
std::vector<size_t> fold_windows(const data::Dataset& dataset, int64_t from, int64_t until);

struct FoldPlanOptions {
  std::optional<int64_t> initial_train_until_ns;  // --initial-train-until
  int64_t initial_train_bars = 0;                 // --initial-train-bars (one of the two)
  FoldStep step;
  int64_t encoder_length = 0, horizon = 0;
  // Each fold after the first updates the last model on the bars since (--refit update):
  // a step must give that update a window to validate on, at this validation fraction.
  bool updates = false;
  double validation_fraction = 0.15;
};

// The folds over `timeline`, the data's distinct timestamps in increasing order. Throws
// UsageError naming the flag: a step shorter than the horizon (in bars, or as a duration at
// the data's median bar spacing), an initial period without the bars of one window or at or
// beyond the data's end; under updates, a step whose new bars leave the update's validation
// split without a window. A duration step follows the calendar; a period holding fewer bars
// than the horizon (a night, a weekend) joins the next fold.
std::vector<Fold> plan_folds(std::span<const int64_t> timeline, const FoldPlanOptions& options);

struct BacktestOptions {
  data::BarSource source;
  // The first fold's training, and every fold's under Refit::Full: data windows,
  // architecture, QAT recipe, training options, device, stop_requested. The backtest itself
  // is the test: no test split is cut from a fold's bars.
  TrainingSetup setup;
  FoldPlanOptions plan;  // its encoder length and horizon come from setup.dataset
  Refit refit = Refit::Update;
  int64_t update_epochs = 1;  // the epochs of each update (Refit::Update)
  bool int8 = false;          // forecast with each fold's int8 export (a QAT model's)
  artifact::Int8Kernels int8_kernels = artifact::Int8Kernels::integer;
  bool keep_models = false;  // keep models/fold-NNN.safetensors (and .int8) of every fold
  double cost_bps = 0.0;     // the desk metrics' trading cost
  // --conformal adaptive --conformal-rate R: every fold's quantiles also issued with
  // adaptive conformal offsets (eval/conformal_walk.h), learned bar by bar from the first
  // fold on, carried across folds and saved in each fold's model file (qtft.conformal).
  std::optional<double> adaptive_conformal_rate;
  // --conformal split: every fold's model fits split offsets on its own validation split as
  // it trains (TrainingRequest::conformal_split; a kept model keeps the first fold's), and
  // the fold's quantiles are also issued with them. Not with adaptive_conformal_rate.
  bool split_conformal = false;
  size_t forecast_batch_size = 512;
  std::filesystem::path output;  // the folder: forecasts.parquet, folds.json, models/
};

// Checks the options that need no data (UsageError naming the flag).
void check_backtest_options(const BacktestOptions& options);

// What the options decide of the results, recorded in folds.json: a backtest resumes only
// with the same (the device, batch sizes of the forecasts and the checkpointing policy do
// not change the numbers and are left out).
nlohmann::json backtest_identity(const BacktestOptions& options);

// How a fold's model came to be: trained afresh, updated from the previous fold's, or the
// previous fold's as it was (--refit none).
enum class FoldModel { Trained, Updated, Kept };
// "train", "update", "none": as folds.json records it.
const char* fold_model_name(FoldModel model);

struct FoldTraining {
  FoldModel kind = FoldModel::Trained;
  int64_t epochs = 0;
  int64_t best_epoch = 0;
  double best_val_loss = 0.0;
  double seconds = 0.0;
};

struct FoldResult {
  Fold fold;
  FoldTraining training;
  eval::ForecastMetrics metrics;  // in units of the model's target scale, as `evaluate`
  eval::DeskMetrics desk;
  int64_t windows = 0;          // the windows forecast
  std::filesystem::path model;  // the model that forecast them
  double forecast_seconds = 0.0;
  // Under conformal offsets: the fold's raw and conformal quantiles against its outcomes,
  // and the method ("adaptive" or "split").
  std::optional<eval::QuantileCoverage> raw_coverage, conformal_coverage;
  std::string conformal_method;
};

// What the backtest reports as it goes; every hook is optional.
class BacktestEvents {
 public:
  virtual ~BacktestEvents() = default;
  virtual void planned(const std::vector<Fold>& /*folds*/, int64_t /*timeline_bars*/) {}
  // Resuming a backtest in the output folder: these folds were finished.
  virtual void resumed(int64_t /*finished_folds*/) {}
  virtual void fold_started(const Fold& /*fold*/, FoldModel /*model*/) {}
  virtual void fold_finished(const FoldResult& /*result*/, int64_t /*folds*/) {}
  // The training's own events and epochs (quiet by default).
  virtual TrainingEvents& training_events() { return quiet_; }
  virtual ProgressReporter& training_progress() { return quiet_progress_; }

 private:
  TrainingEvents quiet_;
  ProgressReporter quiet_progress_;
};

// One figure across the folds where it is finite: its mean and sample standard deviation
// (NaN without a fold, or with one), and for a signed figure (the IC, the position's) the
// t-statistic of the mean (NaN without spread) and how many folds were positive.
struct AcrossFolds {
  double mean = std::numeric_limits<double>::quiet_NaN();
  double sd = std::numeric_limits<double>::quiet_NaN();
  int64_t folds = 0;
  bool is_signed = false;  // t and positive_folds hold
  double t = std::numeric_limits<double>::quiet_NaN();
  int64_t positive_folds = 0;
};

// The summary across the folds recorded in folds.json.
struct BacktestSummary {
  int64_t folds = 0;
  int64_t windows = 0;
  double train_seconds = 0.0, forecast_seconds = 0.0;
  AcrossFolds loss, loss_in_target_units, ic_step1, ic_across_series_step1, interval_coverage, hit_rate, sharpe,
      mean_return;
  // Under conformal offsets (folds without them leave these empty): the conformal quantiles'
  // central interval coverage and loss in the target's units.
  AcrossFolds conformal_interval_coverage, conformal_loss_in_target_units;
};
// folds.json's "summary": each figure's mean, sd and folds (null for NaN), and t and
// positive_folds for the signed ones.
nlohmann::json to_json(const BacktestSummary& summary);

struct BacktestOutcome {
  std::vector<FoldResult> folds;  // those this call ran (a resumed backtest's earlier ones are in folds.json)
  int64_t planned_folds = 0;
  int64_t resumed_folds = 0;               // finished before this call
  int64_t finished_folds = 0;              // recorded in folds.json, the resumed ones included
  bool interrupted = false;                // stopped (setup.stop_requested): resumable from the folds finished
  std::optional<BacktestSummary> summary;  // across every finished fold, once one is
  std::filesystem::path record;            // folds.json: each fold's figures, written as it finishes
  std::filesystem::path forecasts;         // forecasts.parquet, once every fold is done
};

// Runs (or resumes) the walk forward into options.output. Throws UsageError for options
// that contradict the data or a backtest already in the folder, qtft::Error for data that
// cannot be trained or forecast (naming the fold).
BacktestOutcome run_backtest(const BacktestOptions& options, BacktestEvents& events);

// The summary across folds of folds.json, from its folds' records (a resumed backtest's
// earlier folds are known by their records alone).
BacktestSummary summarize_folds(const nlohmann::json& folds);

inline constexpr const char* kBacktestFormat = "qtft-backtest-1";

}  // namespace qtft::train
