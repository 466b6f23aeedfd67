#pragma once

// `qtft tune`: a search over model and training options by successive halving. Every trial
// draws its options from the ranges of a tune file and trains on the same data; the trials
// of a rung train on a budget of epochs (a fraction of one: a share of its batches), the
// best third (1/eta) goes on to the next rung with eta times the budget, until the last
// rung trains the full --epochs. A journal in the output folder, written after every
// trial, lets a stopped search (Ctrl-C, kill -9) go on where it stood.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "qtft/data/bars/bar_source.h"
#include "qtft/train/progress.h"
#include "qtft/train/workflow.h"

namespace qtft::train {

// One option's range: a list of choices, or an interval drawn uniformly (on a log scale
// when `log`; integers rounded).
struct TuneRange {
  std::vector<nlohmann::json> choices;  // non-empty: one of these
  double min = 0.0, max = 0.0;
  bool log = false;
};

// The ranges of a tune file, by option name, and what the options can be.
struct TuneSpace {
  std::map<std::string, TuneRange> ranges;
};

// The options a tune file may range over, as it names them.
const std::vector<std::string>& tunable_options();

// Reads a tune file: a JSON object of option name to range,
//   {"hidden_size": [16, 32, 64], "dropout": {"min": 0.0, "max": 0.3},
//    "learning_rate": {"min": 1e-4, "max": 1e-2, "log": true}, "use_qat": [false, true]}
// Throws UsageError naming the file and, for JSON that does not parse, the line and
// column; for an option that cannot be tuned, its name and the ones that can; for a range
// that is empty or of the wrong type, the option and the value.
TuneSpace read_tune_file(const std::filesystem::path& path);
TuneSpace parse_tune_space(const std::string& text, const std::string& source);

// Trial `index`'s options, drawn from `space` with its own random stream of `seed` (the
// same trial draws the same options in any run): {option: value}.
nlohmann::json draw_trial(const TuneSpace& space, uint64_t seed, int64_t index);

// `base` with the options of a drawn trial set. Throws UsageError naming the option when
// the value does not make a valid setup (check_training_setup).
TrainingSetup apply_trial(const TrainingSetup& base, const nlohmann::json& options);

// Successive halving's rungs for `trials` trials at reduction `eta`: how many trials each
// rung trains and its budget as a fraction of the full one (the last rung's is 1).
struct Rung {
  int64_t trials = 0;
  double budget = 1.0;
};
std::vector<Rung> halving_rungs(int64_t trials, int64_t eta);

enum class TuneMethod { Halving, Random };
TuneMethod parse_tune_method(const std::string& name);  // halving | random; else UsageError naming --method

// What ranks the trials, on the validation split of each: its loss (the best epoch's), the
// median's information coefficient at the first step (pooled; higher is better), or how far
// the central interval's coverage lies from its nominal level.
enum class TuneObjective { Loss, Ic, Coverage };
TuneObjective parse_tune_objective(const std::string& name);  // loss | ic | coverage; else UsageError
const char* tune_objective_name(TuneObjective objective);

struct TuneOptions {
  data::BarSource source;
  TrainingSetup base;  // the options no trial changes; its train.epochs is the full budget
  std::filesystem::path tune_file;
  TuneSpace space;
  int64_t trials = 16;
  int64_t eta = 3;
  TuneMethod method = TuneMethod::Halving;
  TuneObjective objective = TuneObjective::Loss;
  // Random: every trial trains this fraction of the full budget (0: the budget halving
  // spends over all its trials, divided among them, so that both cost the same).
  double random_budget = 0.0;
  uint64_t seed = 1;
  // A wall-clock budget for the trials' training, in seconds (0: none). No trial run starts
  // once the search's runs (the resumed ones included) have taken it; the best of the
  // furthest rung reached is then the search's result. Not part of the search's identity:
  // a search stopped by its budget goes on under a larger one. Side by side, the workers
  // spend it together (their trials' seconds divided by their number); each stops after the
  // trial it is training, and the first reads the end once every worker has stopped.
  double time_budget_seconds = 0.0;
  // Trials side by side (`qtft tune --nproc N` starts N worker processes): this process is
  // worker `worker` of `workers`. Each trains every workers-th trial of a rung, in the rung's
  // order, recording it in a journal of its own (journal-worker-W.json, read by the others),
  // and waits at the rung's end until every trial of it is recorded; then every worker
  // promotes alike, as one process would. At the end the first writes journal.json with every
  // run and saves the best. A search stopped under one --nproc goes on under any other. 1: alone.
  int64_t workers = 1, worker = 0;
  // Side by side: what names this launch of the workers (the CLI gives the launcher's pid and
  // rendezvous port), so that a worker's mark in its journal is never read by another launch.
  std::string launch;
  std::filesystem::path output;  // journal.json, trials/, best.safetensors
};

struct TrialRun {
  int64_t trial = 0, rung = 0;
  nlohmann::json options;
  double budget = 0.0;  // the fraction of the full budget it trained
  int64_t epochs = 0, max_batches_per_epoch = 0;
  double val_loss = 0.0;
  // What ranked it, lower is better: the loss, minus the IC, or |coverage - nominal|. NaN
  // for a trial that failed.
  double objective = 0.0;
  double ic = 0.0, coverage = 0.0;  // on the validation split, under --objective ic or coverage
  double seconds = 0.0;
};

class TuneEvents {
 public:
  virtual ~TuneEvents() = default;
  virtual void planned(const std::vector<Rung>& /*rungs*/, int64_t /*batches_per_epoch*/) {}
  virtual void resumed(int64_t /*finished_runs*/) {}
  // The feature store every trial maps (none for the embedded data or --no-feature-store).
  virtual void feature_store_ready(const data::StorePreparation& /*store*/) {}
  virtual void trial_started(const TrialRun& /*run*/) {}
  virtual void trial_finished(const TrialRun& /*run*/) {}
  virtual TrainingEvents& training_events() { return quiet_; }
  virtual ProgressReporter& training_progress() { return quiet_progress_; }

 private:
  TrainingEvents quiet_;
  ProgressReporter quiet_progress_;
};

struct TuneOutcome {
  std::vector<TrialRun> runs;  // every run in the journal, in the order run
  // The last rung's best (random: the best of all); out of time, the furthest rung's best.
  std::optional<TrialRun> best;
  std::filesystem::path best_model, journal;
  bool interrupted = false;
  bool out_of_time = false;  // the time budget ended the search before its last rung
  double seconds = 0.0;      // the trials' training, this call and the resumed ones
};

// A journal's run (one element of its "runs"), as run_tune wrote it.
TrialRun trial_run_from_json(const nlohmann::json& run);
// Whether `a` ranks before `b`: the lower objective, a failed trial (NaN) last, ties to the
// earlier trial.
bool ranks_before(const TrialRun& a, const TrialRun& b);
// The search's result among `runs`: the best of the furthest rung any run reached (the last
// rung, unless a time budget ended the search before it). nullopt when no run there trained.
std::optional<TrialRun> best_of_furthest_rung(const std::vector<TrialRun>& runs);

// Runs (or resumes) the search into options.output. Throws UsageError for options that
// contradict a search already in the folder (naming both tune files), qtft::Error for data
// no trial can train on.
TuneOutcome run_tune(const TuneOptions& options, TuneEvents& events);

inline constexpr const char* kTuneFormat = "qtft-tune-1";

}  // namespace qtft::train
