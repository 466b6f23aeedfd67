// The search itself: trials drawn from the tune file, trained rung by rung on growing
// budgets (or all on one budget, at random), each recorded in the journal as it finishes so
// that a stopped search goes on where it stood.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/bars.h"
#include "qtft/data/store/feature_store.h"
#include "qtft/eval/evaluate.h"
#include "qtft/io/atomic_file.h"
#include "qtft/train/calibration.h"
#include "qtft/train/run_training.h"
#include "qtft/train/tune.h"

namespace qtft::train {
namespace {

namespace fs = std::filesystem;

fs::path trial_model(const fs::path& dir, int64_t trial) {
  char name[64];
  std::snprintf(name, sizeof name, "trial-%03lld.safetensors", static_cast<long long>(trial));
  return dir / "trials" / name;
}

nlohmann::json to_json(const TuneRange& range) {
  if (!range.choices.empty()) return range.choices;
  return {{"min", range.min}, {"max", range.max}, {"log", range.log}};
}

nlohmann::json to_json(const TrialRun& run) {
  return {{"trial", run.trial},
          {"rung", run.rung},
          {"options", run.options},
          {"budget", run.budget},
          {"epochs", run.epochs},
          {"max_batches_per_epoch", run.max_batches_per_epoch},
          {"val_loss", std::isfinite(run.val_loss) ? nlohmann::json(run.val_loss) : nlohmann::json(nullptr)},
          {"objective", std::isfinite(run.objective) ? nlohmann::json(run.objective) : nlohmann::json(nullptr)},
          {"ic", run.ic},
          {"coverage", run.coverage},
          {"seconds", run.seconds}};
}

// What decides the search's results: a journal goes on only under the same.
nlohmann::json tune_identity(const TuneOptions& o) {
  nlohmann::json space = nlohmann::json::object();
  for (const auto& [name, range] : o.space.ranges) space[name] = to_json(range);
  auto identity = training_identity(o.source, o.base);
  identity["space"] = space;
  identity["trials"] = o.trials;
  identity["eta"] = o.eta;
  identity["method"] = o.method == TuneMethod::Halving ? "halving" : "random";
  identity["objective"] = tune_objective_name(o.objective);
  identity["random_budget"] = o.random_budget;
  identity["seed"] = o.seed;
  return identity;
}

// The windows a trial trains on per epoch, in batches, from the bars' counts: what a
// fraction of an epoch is (each series gives its bars less the window's length, plus one,
// windows; the training split takes what validation and test leave).
int64_t batches_per_epoch(const std::vector<int64_t>& series_bars, const TrainingSetup& setup) {
  const auto& d = setup.dataset;
  double windows = 0;
  for (int64_t n : series_bars)
    windows += static_cast<double>(std::max<int64_t>(0, n - d.encoder_length - d.horizon + 1));
  windows *= std::max(0.0, 1.0 - d.validation_fraction - d.test_fraction);
  auto batches = static_cast<int64_t>(std::ceil(windows / static_cast<double>(setup.train.batch_size)));
  if (setup.train.max_batches_per_epoch > 0) batches = std::min(batches, setup.train.max_batches_per_epoch);
  return std::max<int64_t>(1, batches);
}

// One journal file: read, its format and identity checked against this search's. Null when
// the file is gone (another worker's, consolidated meanwhile into journal.json).
nlohmann::json read_journal(const fs::path& path, const TuneOptions& o, const nlohmann::json& identity) {
  nlohmann::json document;
  std::ifstream in(path);
  if (!in) return nullptr;
  try {
    document = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not readable JSON (" + e.what() + ")");
  }
  if (!document.is_object() || document.value("format", "") != kTuneFormat) {
    throw Error(path.string() + ": not a qtft tune journal (format " + kTuneFormat + ")");
  }
  const auto& recorded = document.at("identity");
  const std::string started_from = document.value("tune_file", "?");
  if (recorded.at("space") != identity.at("space")) {
    throw UsageError(o.tune_file.string() + " ranges over " + identity.at("space").dump() + ", but the search in " +
                     path.string() + " was started from " + started_from + " ranging over " +
                     recorded.at("space").dump() +
                     ": go on with the file it was started with, or search in another folder");
  }
  for (const auto& [key, value] : identity.items()) {
    if (recorded.value(key, nlohmann::json(nullptr)) != value) {
      throw UsageError("--output " + o.output.string() + " holds a search with other options (" + key + ": " +
                       recorded.value(key, nlohmann::json(nullptr)).dump() + " there, " + value.dump() +
                       " here): go on with the options it was started with, or search in another folder");
    }
  }
  return document;
}

fs::path worker_journal(const fs::path& dir, int64_t worker) {
  return dir / ("journal-worker-" + std::to_string(worker) + ".json");
}

// The search's record. Alone, a process writes journal.json; worker w of a search run side
// by side (--nproc) writes journal-worker-w.json, and reads the others' to learn their runs.
// Its view is every run in any of the folder's journals (each trial run once).
class Journal {
 public:
  Journal(const TuneOptions& o, nlohmann::json identity)
      : options_(o),
        identity_(std::move(identity)),
        main_(o.output / "journal.json"),
        path_(o.workers > 1 ? worker_journal(o.output, o.worker) : main_) {
    document_ = read_journal(path_, o, identity_);
    if (document_.is_object()) document_.erase("out_of_time");  // a mark of the run before this one
    if (document_.is_null()) {
      document_ = {{"format", kTuneFormat},
                   {"tune_file", o.tune_file.string()},
                   {"identity", identity_},
                   {"runs", nlohmann::json::array()}};
    }
    refresh();
    for (const auto& run : document_.at("runs")) take(trial_run_from_json(run));
  }

  // Takes in the runs the folder's other journals hold now (a search stopped under other
  // --nproc, the other workers').
  void refresh() {
    std::vector<fs::path> others;
    std::error_code ec;
    if (path_ != main_) others.push_back(main_);
    for (const auto& entry : fs::directory_iterator(options_.output, ec)) {
      const auto name = entry.path().filename().string();
      if (name.rfind("journal-worker-", 0) == 0 && entry.path().extension() == ".json" && entry.path() != path_) {
        others.push_back(entry.path());
      }
    }
    std::sort(others.begin() + (path_ != main_ ? 1 : 0), others.end());
    for (const auto& other : others) {
      const auto document = read_journal(other, options_, identity_);
      if (document.is_null()) continue;  // consolidated meanwhile: journal.json has its runs
      for (const auto& run : document.at("runs")) take(trial_run_from_json(run));
    }
  }

  const std::vector<TrialRun>& runs() const { return runs_; }
  const TrialRun* find(int64_t trial, int64_t rung) const {
    for (const auto& r : runs_) {
      if (r.trial == trial && r.rung == rung) return &r;
    }
    return nullptr;
  }
  void add(const TrialRun& run) {
    take(run);
    document_["runs"].push_back(to_json(run));
    write();
  }
  void write() const { io::write_file_atomically(path_, document_.dump(2) + "\n"); }
  // Side by side under a time budget, a worker that stops for want of time says so in its
  // journal. The mark names the launch of the workers, so that a mark left by another launch
  // (a search stopped as its first worker waited, then resumed) is never taken for this one's.
  void mark_out_of_time() {
    document_["out_of_time"] = out_of_time_mark();
    write();
  }
  // How many of this launch's workers have marked their journals.
  int64_t workers_out_of_time() const {
    int64_t marked = 0;
    for (int64_t w = 0; w < options_.workers; ++w) {
      const auto document =
          w == options_.worker ? document_ : read_journal(worker_journal(options_.output, w), options_, identity_);
      marked += document.is_object() && document.value("out_of_time", nlohmann::json()) == out_of_time_mark();
    }
    return marked;
  }
  // The search is over: journal.json holds every run, and the workers' journals go.
  void consolidate() {
    refresh();
    nlohmann::json all = document_;
    all.erase("out_of_time");
    all["runs"] = nlohmann::json::array();
    for (const auto& run : runs_) all["runs"].push_back(to_json(run));
    io::write_file_atomically(main_, all.dump(2) + "\n");
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(options_.output, ec)) {
      if (entry.path().filename().string().rfind("journal-worker-", 0) == 0) fs::remove(entry.path(), ec);
    }
  }
  const fs::path& path() const { return main_; }

 private:
  void take(const TrialRun& run) {
    if (!find(run.trial, run.rung)) runs_.push_back(run);
  }
  nlohmann::json out_of_time_mark() const {
    return {{"launch", options_.launch}, {"budget", options_.time_budget_seconds}};
  }

  const TuneOptions& options_;
  nlohmann::json identity_;
  fs::path main_, path_;
  nlohmann::json document_;
  std::vector<TrialRun> runs_;
};

// The trained model at `path` on its validation split, as a desk reads it: the objective's
// IC or coverage into `run`.
void score_on_validation(const fs::path& path, const data::BarSource& source, TuneObjective objective,
                         const TrainingSetup& setup, TrialRun& run) {
  auto loaded = artifact::load_model(path, setup.device);
  loaded.model->eval();
  // The trials' store when there is one (the model's inputs are its own: it maps as is).
  const auto dataset = data::open_dataset(source, loaded.file.dataset, &loaded.file.features);
  const auto desk = eval::evaluate_for_desk(loaded.model, dataset, data::Split::Validation, setup.train.eval_batch_size,
                                            loaded.device, 0.0)
                        .desk;
  run.ic = desk.ic_pooled.empty() ? NAN : desk.ic_pooled.front().ic;
  run.coverage = desk.interval_coverage;
  run.objective = objective == TuneObjective::Ic ? -run.ic : std::abs(desk.interval_coverage - desk.interval_nominal);
}

// Where the trials read their data: one feature store for all of them. A dataset folder
// has its own (or --feature-store's); a single file's is kept in the search's folder, so
// that no trial reads and featurizes the file again. The store holds no windows, so the
// trials of every encoder length map the same one. The embedded data stays in memory.
data::BarSource trial_source(const TuneOptions& o) {
  data::BarSource source = o.source;
  if (!source.in_memory && !source.uses_embedded_data() && source.feature_store_folder().empty()) {
    source.feature_store = (o.output / "features").string();
  }
  return source;
}

// The trials' store, prepared before the first trial: the first worker builds it when it is
// missing, the others wait for it (a first build side by side is one build, not one per
// worker). nullopt when stopped meanwhile.
std::optional<data::StorePreparation> trials_store(const data::BarSource& source, const TuneOptions& o,
                                                   const std::function<bool()>& stop) {
  if (o.worker == 0) return data::prepare_feature_store(source, o.base.dataset, nullptr);
  while (true) {
    if (auto store = data::find_feature_store(source, o.base.dataset, nullptr)) return store;
    if (stop()) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

TrialRun trial_run_from_json(const nlohmann::json& j) {
  TrialRun run;
  run.trial = j.at("trial").get<int64_t>();
  run.rung = j.at("rung").get<int64_t>();
  run.options = j.at("options");
  run.budget = j.at("budget").get<double>();
  run.epochs = j.at("epochs").get<int64_t>();
  run.max_batches_per_epoch = j.at("max_batches_per_epoch").get<int64_t>();
  run.val_loss = j.at("val_loss").is_null() ? NAN : j.at("val_loss").get<double>();
  run.objective = j.at("objective").is_null() ? NAN : j.at("objective").get<double>();
  run.ic = j.value("ic", 0.0);
  run.coverage = j.value("coverage", 0.0);
  run.seconds = j.at("seconds").get<double>();
  return run;
}

bool ranks_before(const TrialRun& a, const TrialRun& b) {
  // A trial that failed (NaN) loses to any that trained; ties go to the earlier trial.
  if (std::isnan(a.objective) != std::isnan(b.objective)) return std::isnan(b.objective);
  if (a.objective != b.objective) return a.objective < b.objective;
  return a.trial < b.trial;
}

std::optional<TrialRun> best_of_furthest_rung(const std::vector<TrialRun>& runs) {
  int64_t furthest = -1;
  for (const auto& run : runs) furthest = std::max(furthest, run.rung);
  const TrialRun* best = nullptr;
  for (const auto& run : runs) {
    if (run.rung == furthest && (!best || ranks_before(run, *best))) best = &run;
  }
  if (!best || !std::isfinite(best->objective)) return std::nullopt;
  return *best;
}

TuneOutcome run_tune(const TuneOptions& options, TuneEvents& events) {
  const TuneOptions& o = options;
  if (o.output.empty()) throw UsageError("--output DIR: where the search writes its journal is required");
  if (o.space.ranges.empty()) throw UsageError(o.tune_file.string() + ": ranges over no option");
  if (o.random_budget < 0 || o.random_budget > 1) {
    throw UsageError("--random-budget " + format_number(o.random_budget) + ": must lie in [0, 1]");
  }
  if (o.time_budget_seconds < 0) {
    throw UsageError("--time-budget " + format_number(o.time_budget_seconds) + ": must be positive (0: none)");
  }
  if (o.workers < 1 || o.worker < 0 || o.worker >= o.workers) {
    throw UsageError("tune: worker " + std::to_string(o.worker) + " of " + std::to_string(o.workers));
  }
  check_training_setup(o.base);
  const auto rungs = halving_rungs(o.trials, o.eta);
  fs::create_directories(o.output / "trials");
  // One search at a time in a folder (each worker of one run side by side holds its own).
  io::OutputLock lock(o.workers > 1 ? worker_journal(o.output, o.worker) : o.output / "journal.json");
  Journal journal(o, tune_identity(o));
  journal.write();
  TuneOutcome outcome;
  outcome.journal = journal.path();
  const auto stop = [&] { return o.base.stop_requested && o.base.stop_requested(); };

  // The bars are counted once: each trial's fraction of an epoch is a share of its batches.
  const data::BarSource source = trial_source(o);
  std::vector<int64_t> series_bars;
  if (!source.feature_store_folder().empty()) {
    const auto store = trials_store(source, o, stop);
    if (!store) {
      outcome.interrupted = true;
      return outcome;
    }
    events.feature_store_ready(*store);
    // From the store, not the source: a folder larger than memory is never loaded. A row
    // reads its bar and the one before, so a series of n rows has n + 1 bars.
    for (const auto& s : data::map_feature_store(store->path, o.base.dataset).series()) {
      series_bars.push_back(static_cast<int64_t>(s.timestamp_ns.size()) + 1);
    }
  } else {
    for (const auto& s : data::load_bars(source).series) series_bars.push_back(static_cast<int64_t>(s.size()));
  }
  events.planned(rungs, batches_per_epoch(series_bars, o.base));
  if (!journal.runs().empty()) events.resumed(static_cast<int64_t>(journal.runs().size()));
  const auto out_of_time = [&] {
    if (o.time_budget_seconds <= 0) return false;
    if (o.workers > 1) journal.refresh();
    double spent = 0;
    for (const auto& run : journal.runs()) spent += run.seconds;
    // Side by side, the workers spend the budget together: their trials' seconds, shared.
    return spent / static_cast<double>(o.workers) >= o.time_budget_seconds;
  };

  // Trains `trial` at `rung` on `budget` of the full one (or takes its journal entry).
  const auto run_trial = [&](int64_t trial, int64_t rung, double budget) -> std::optional<TrialRun> {
    if (const TrialRun* done = journal.find(trial, rung)) return *done;
    if (out_of_time()) {
      outcome.out_of_time = true;
      return std::nullopt;
    }
    if (stop()) return std::nullopt;
    TrialRun run;
    run.trial = trial;
    run.rung = rung;
    run.options = draw_trial(o.space, o.seed, trial);
    run.budget = budget;
    run.val_loss = NAN;
    run.objective = NAN;
    const auto start = std::chrono::steady_clock::now();
    try {
      TrainingRequest request;
      request.source = source;
      request.setup = apply_trial(o.base, run.options);
      const double epochs = budget * static_cast<double>(o.base.train.epochs);
      if (epochs >= 1.0) {
        request.setup.train.epochs = std::llround(epochs);
      } else {
        request.setup.train.epochs = 1;
        request.setup.train.max_batches_per_epoch = std::max<int64_t>(
            1, std::llround(epochs * static_cast<double>(batches_per_epoch(series_bars, request.setup))));
      }
      run.epochs = request.setup.train.epochs;
      run.max_batches_per_epoch = request.setup.train.max_batches_per_epoch;
      request.save_model = trial_model(o.output, trial);
      events.trial_started(run);
      const auto trained = run_training(request, events.training_events(), events.training_progress());
      if (trained.result.interrupted) return std::nullopt;
      run.val_loss = trained.result.best_val.loss;
      run.objective = run.val_loss;
      if (o.objective != TuneObjective::Loss) {
        score_on_validation(request.save_model, source, o.objective, request.setup, run);
      }
    } catch (const Interrupted&) {
      return std::nullopt;
    } catch (const UsageError& e) {
      // Options no model can take (a hidden size the heads do not divide): the trial fails
      // and is never promoted; the search goes on.
      std::fprintf(stderr, "qtft tune: trial %lld: %s\n", static_cast<long long>(trial), e.what());
    }
    run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    journal.add(run);
    events.trial_finished(run);
    return run;
  };

  // Trains this process's share of `trials` at `rung` (all of them alone; side by side, every
  // workers-th in the list's order), then waits for the other workers' share: every trial's
  // run, or nullopt when stopped (or out of time).
  const auto run_rung = [&](const std::vector<int64_t>& trials, int64_t rung,
                            double budget) -> std::optional<std::vector<TrialRun>> {
    for (size_t k = 0; k < trials.size(); ++k) {
      if (static_cast<int64_t>(k) % o.workers != o.worker) continue;
      if (!run_trial(trials[k], rung, budget)) return std::nullopt;
    }
    std::vector<TrialRun> ran;
    for (int64_t trial : trials) {
      while (!journal.find(trial, rung)) {  // another worker's, still training
        if (stop()) return std::nullopt;
        if (o.time_budget_seconds > 0 && journal.workers_out_of_time() > 0) {
          outcome.out_of_time = true;  // one that ran out will not train its share
          return std::nullopt;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        journal.refresh();
      }
      ran.push_back(*journal.find(trial, rung));
    }
    return ran;
  };

  if (o.method == TuneMethod::Halving) {
    std::vector<int64_t> survivors(static_cast<size_t>(o.trials));
    for (int64_t t = 0; t < o.trials; ++t) survivors[static_cast<size_t>(t)] = t;
    for (size_t r = 0; r < rungs.size(); ++r) {
      auto ran = run_rung(survivors, static_cast<int64_t>(r), rungs[r].budget);
      if (!ran) {
        outcome.interrupted = true;
        break;
      }
      if (r + 1 == rungs.size()) break;
      std::sort(ran->begin(), ran->end(), ranks_before);
      survivors.clear();
      for (size_t k = 0; k < ran->size() && static_cast<int64_t>(k) < rungs[r + 1].trials; ++k) {
        survivors.push_back((*ran)[k].trial);
      }
    }
  } else {
    // The budget halving spends over all its trials, shared equally, unless given.
    double spent = 0;
    for (const auto& rung : rungs) spent += static_cast<double>(rung.trials) * rung.budget;
    const double budget = o.random_budget > 0 ? o.random_budget : spent / static_cast<double>(o.trials);
    std::vector<int64_t> trials(static_cast<size_t>(o.trials));
    for (int64_t t = 0; t < o.trials; ++t) trials[static_cast<size_t>(t)] = t;
    if (!run_rung(trials, 0, budget)) outcome.interrupted = true;
  }
  if (outcome.out_of_time) {
    outcome.interrupted = false;  // the budget ended it, not a stop
    if (o.workers > 1) {
      // Each worker stops after the trial it was training, and says so; the first waits for
      // every one of them before it reads the search's end.
      journal.mark_out_of_time();
      while (o.worker == 0 && journal.workers_out_of_time() < o.workers) {
        if (stop()) {
          outcome.interrupted = true;
          outcome.out_of_time = false;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
  }
  // The search is over: one journal holds it (the first worker writes it, side by side).
  if (!outcome.interrupted && o.worker == 0) journal.consolidate();
  outcome.runs = journal.runs();
  for (const auto& run : outcome.runs) outcome.seconds += run.seconds;
  // Done, or out of time: the best of the furthest rung reached (the last, unless the budget
  // ended the search before it).
  if (!outcome.interrupted) outcome.best = best_of_furthest_rung(outcome.runs);
  if (outcome.best) {
    if (o.worker != 0) return outcome;  // the first worker saves it
    outcome.best_model = o.output / "best.safetensors";
    std::ifstream in(trial_model(o.output, outcome.best->trial), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    io::write_file_atomically(outcome.best_model, bytes);
  }
  return outcome;
}

}  // namespace qtft::train
