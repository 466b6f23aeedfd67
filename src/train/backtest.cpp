// The walk forward itself: per fold, train (or update, or keep) the model on the bars known
// at the fold's date, forecast the next step's windows out of sample, and record the fold
// before starting the next, so that a stopped backtest resumes where it stood.
#include "qtft/train/backtest.h"

#include <ATen/ops/tensor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>

#include "qtft/artifact/int8_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/backtest_forecasts.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/store/feature_store.h"
#include "qtft/eval/conformal_evaluation.h"
#include "qtft/eval/conformal_walk.h"
#include "qtft/eval/evaluate.h"
#include "qtft/eval/explanation.h"
#include "qtft/eval/forecast_rows.h"
#include "qtft/eval/window_units.h"
#include "qtft/io/atomic_file.h"
#include "qtft/train/calibration.h"
#include "qtft/train/run_training.h"

namespace qtft::train {
namespace {

namespace fs = std::filesystem;

std::string numbered(const char* stem, int64_t fold, const char* extension) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-%03lld%s", stem, static_cast<long long>(fold), extension);
  return name;
}

fs::path model_path(const fs::path& dir, int64_t fold) {
  return dir / "models" / numbered("fold", fold, ".safetensors");
}
fs::path int8_path(const fs::path& dir, int64_t fold) {
  return dir / "models" / numbered("fold", fold, ".int8.safetensors");
}
fs::path part_path(const fs::path& dir, int64_t fold) { return dir / "parts" / numbered("fold", fold, ".parquet"); }

// A fold's forecast rows held before they are written to its part: one Parquet row group.
constexpr size_t kRowsPerPartWrite = 64 * 1024;

// The clock's time `bars` bars before `t` (a clock time), or its first.
int64_t bars_before(const std::vector<int64_t>& timeline, int64_t t, int64_t bars) {
  const auto at = std::lower_bound(timeline.begin(), timeline.end(), t) - timeline.begin();
  return timeline[static_cast<size_t>(std::max<int64_t>(0, at - bars))];
}

}  // namespace

std::vector<size_t> fold_windows(const data::Dataset& dataset, int64_t from, int64_t until) {
  const int64_t encoder = dataset.options().encoder_length, horizon = dataset.options().horizon;
  std::vector<size_t> indices;
  for (size_t s = 0; s < dataset.series().size(); ++s) {
    const auto ts = dataset.series()[s].timestamp_ns;
    const auto windows = static_cast<int64_t>(ts.size()) - encoder - horizon + 1;
    if (windows <= 0) continue;
    const auto origin_index = [&](int64_t t) {
      return (std::lower_bound(ts.begin(), ts.end(), t) - ts.begin()) - (encoder - 1);
    };
    const int64_t first = std::max<int64_t>(0, origin_index(from));
    const int64_t last = std::min(windows, origin_index(until));
    for (int64_t w = first; w < last; ++w) indices.push_back(dataset.first_window(data::Split::All, s) + w);
  }
  return indices;
}

namespace {

// Every window a fold scores, under its model's features. In memory (a file, or
// --no-feature-store): the whole data's windows, kept while the features stay the same (an
// update keeps its model's; a full refit fits its own). Bounded (a folder with its feature
// store): each fold reads only its bars, with the history its first window needs, so memory
// follows the step, not the data.
class ScoringData {
 public:
  ScoringData(data::BarSource source, std::shared_ptr<const data::BarSet> bars)
      : source_(std::move(source)), bars_(std::move(bars)) {}
  const data::Dataset& under(const artifact::ModelFile& model, int64_t from_ns, int64_t through_ns) {
    if (!bars_) {
      dataset_.reset();
      auto source = data::with_model_inputs(source_, model.features);
      source.from_ns = from_ns;
      source.through_ns = through_ns;
      // Only the windows of every split (All) are scored: halves keep a short read valid.
      auto windows = model.dataset;
      windows.validation_fraction = 0.5;
      windows.test_fraction = 0;
      dataset_ =
          std::make_unique<data::Dataset>(data::Dataset::build(data::load_bars(source), windows, model.features));
      return *dataset_;
    }
    const std::string key =
        nlohmann::json{{"spec", data::to_json(model.features)}, {"windows", data::to_json(model.dataset)}}.dump();
    if (!dataset_ || key != key_) {
      dataset_.reset();  // one at a time
      dataset_ = std::make_unique<data::Dataset>(data::Dataset::build(*bars_, model.dataset, model.features));
      key_ = key;
    }
    return *dataset_;
  }

 private:
  data::BarSource source_;
  std::shared_ptr<const data::BarSet> bars_;  // null: bounded
  std::unique_ptr<data::Dataset> dataset_;
  std::string key_;
};

nlohmann::json utc_or_null(int64_t ns) {
  return ns == std::numeric_limits<int64_t>::max() ? nlohmann::json(nullptr) : nlohmann::json(format_utc(ns));
}

// The top-level options that differ between a recorded backtest and this one, as
// "refit: update there, none here".
std::string differences(const nlohmann::json& recorded, const nlohmann::json& now) {
  std::string out;
  for (const auto& [key, value] : now.items()) {
    const auto there = recorded.contains(key) ? recorded.at(key) : nlohmann::json(nullptr);
    if (there == value) continue;
    // Nested objects name their first differing key.
    std::string name = key, a = there.dump(), b = value.dump();
    if (there.is_object() && value.is_object()) {
      for (const auto& [inner, v] : value.items()) {
        const auto t = there.contains(inner) ? there.at(inner) : nlohmann::json(nullptr);
        if (t == v) continue;
        name = key + "." + inner, a = t.dump(), b = v.dump();
        break;
      }
    }
    out += (out.empty() ? "" : "; ") + name + ": " + a + " there, " + b + " here";
  }
  // An option recorded there that this run does not have at all (one that is on only when given).
  for (const auto& [key, value] : recorded.items()) {
    if (!now.contains(key)) out += (out.empty() ? "" : "; ") + key + ": " + value.dump() + " there, null here";
  }
  return out;
}

// Every series must have bars by the first fold's date: the first model learns its
// symbols there, and a later listing is one no fold's model (nor an update) could forecast.
void require_known_from_the_start(const data::SourceClock& clock, const Fold& first, const FoldPlanOptions& plan) {
  for (const auto& [symbol, first_bar] : clock.first_bar) {
    if (first_bar <= first.train_through_ns) continue;
    const std::string flag = plan.initial_train_until_ns ? "--initial-train-until" : "--initial-train-bars";
    throw UsageError(flag + ": the first fold trains through " + format_utc(first.train_through_ns) + ", but symbol '" +
                     symbol + "' starts at " + format_utc(first_bar) +
                     ": no model of the walk would know it; start the walk after it or leave the symbol out");
  }
}

struct FolderState {
  nlohmann::json document;
  int64_t finished = 0;
};

// The output folder is new, empty, or a backtest's: anything else is not written into.
void require_backtest_folder(const BacktestOptions& o) {
  std::error_code ec;
  if (fs::exists(o.output / "folds.json", ec)) return;
  if (fs::exists(o.output, ec) && (!fs::is_directory(o.output, ec) || !fs::is_empty(o.output, ec))) {
    throw UsageError("--output " + o.output.string() +
                     ": holds files but no folds.json, so it is not a backtest's output to resume; give a new or "
                     "empty folder");
  }
}

// The record of the backtest in the folder, which must be this one, or a new one.
FolderState read_folder(const BacktestOptions& o, const nlohmann::json& identity, const std::vector<Fold>& folds) {
  FolderState state;
  const fs::path record = o.output / "folds.json";
  std::error_code ec;
  if (!fs::exists(record, ec)) {
    state.document = {{"format", kBacktestFormat}, {"options", identity}, {"folds", nlohmann::json::array()}};
    return state;
  }
  std::ifstream in(record);
  try {
    state.document = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(record.string() + ": not readable JSON (" + e.what() + ")");
  }
  if (!state.document.is_object() || state.document.value("format", "") != kBacktestFormat ||
      !state.document.contains("options") || !state.document.contains("folds")) {
    throw Error(record.string() + ": not a qtft backtest's record (format " + kBacktestFormat + ")");
  }
  const auto& recorded = state.document.at("options");
  if (recorded != identity) {
    throw UsageError("--output " + o.output.string() + " holds a backtest with other options (" +
                     differences(recorded, identity) +
                     "): resume it with the options it was started with, or write to another folder");
  }
  const auto& done = state.document.at("folds");
  state.finished = static_cast<int64_t>(done.size());
  for (int64_t k = 0; k < state.finished; ++k) {
    // Both ends: bars added after a finished walk's end move its last fold's end.
    const bool same = k < static_cast<int64_t>(folds.size()) &&
                      done[static_cast<size_t>(k)].value("train_through", "") ==
                          format_utc(folds[static_cast<size_t>(k)].train_through_ns) &&
                      done[static_cast<size_t>(k)].value("forecast_until", nlohmann::json(nullptr)) ==
                          utc_or_null(folds[static_cast<size_t>(k)].forecast_until_ns);
    if (!same) {
      throw Error(record.string() + ": fold " + std::to_string(k) +
                  " was planned with other dates: the data changed since the backtest began; start it anew in "
                  "another folder");
    }
  }
  return state;
}

void write_document(const BacktestOptions& o, const nlohmann::json& document) {
  io::write_file_atomically(o.output / "folds.json", document.dump(2) + "\n");
}

}  // namespace

BacktestOutcome run_backtest(const BacktestOptions& options, BacktestEvents& events) {
  check_backtest_options(options);
  BacktestOptions o = options;
  // A folder with its feature store is walked in bounded memory: fold 0 (and a full refit)
  // trains from a store of the bars through its date, and each update and each fold's
  // forecasts read only their bars. Anything else is read into memory once.
  const bool bounded = !o.source.feature_store_folder().empty();
  if (!bounded) o.source.in_memory = true;
  o.setup.dataset.test_fraction = 0;  // the walk forward is the test
  o.plan.encoder_length = o.setup.dataset.encoder_length;
  o.plan.horizon = o.setup.dataset.horizon;
  o.plan.updates = o.refit == Refit::Update;
  o.plan.validation_fraction = o.setup.dataset.validation_fraction;
  const auto stop = [&] { return o.setup.stop_requested && o.setup.stop_requested(); };

  std::shared_ptr<const data::BarSet> bars;
  if (!bounded) bars = std::make_shared<const data::BarSet>(data::load_bars(o.source));
  const auto clock = bounded ? data::read_source_clock(o.source) : data::clock_of(*bars);
  const auto& timeline = clock.timeline;
  const auto folds = plan_folds(timeline, o.plan);
  require_known_from_the_start(clock, folds.front(), o.plan);
  events.planned(folds, static_cast<int64_t>(timeline.size()));
  const auto identity = backtest_identity(o);
  require_backtest_folder(o);
  fs::create_directories(o.output);
  io::OutputLock lock(o.output / "folds.json");  // one backtest at a time in a folder
  auto state = read_folder(o, identity, folds);
  if (state.document.value("planned_folds", folds.size()) != folds.size()) {
    throw Error((o.output / "folds.json").string() + ": planned " + state.document.at("planned_folds").dump() +
                " folds, the data now gives " + std::to_string(folds.size()) +
                ": the data changed since the backtest began; start it anew in another folder");
  }
  state.document["planned_folds"] = folds.size();
  fs::create_directories(o.output / "models");
  fs::create_directories(o.output / "parts");
  // Recorded before the first fold trains, so that a backtest stopped in fold 0 resumes.
  if (state.finished == 0) write_document(o, state.document);
  BacktestOutcome outcome;
  outcome.planned_folds = static_cast<int64_t>(folds.size());
  outcome.resumed_folds = state.finished;
  if (state.finished > 0) events.resumed(state.finished);

  // Adaptive conformal offsets walk on across folds (and across a stop: the record keeps them).
  std::optional<eval::AdaptiveConformalWalk> conformal;
  if (o.adaptive_conformal_rate) {
    if (state.document.contains("conformal_state")) {
      conformal = eval::AdaptiveConformalWalk::from_json(state.document.at("conformal_state"));
    } else {
      const auto& d = o.setup.dataset;
      model::TftOptions probe(1, 1, 1, d.encoder_length, d.horizon);
      o.setup.architecture.apply_to(probe);
      conformal.emplace(probe.quantiles(), d.horizon, *o.adaptive_conformal_rate);
    }
  }
  ScoringData scoring(o.source, bars);
  // The issued quantiles go beside the model's, unless the walk began under a qtft that
  // wrote its parts without them: the folds' parts make one table.
  const bool with_conformal =
      (conformal.has_value() || o.split_conformal) &&
      (!fs::exists(part_path(o.output, 0)) || data::backtest_forecasts_have_conformal(part_path(o.output, 0).string()));
  const int64_t context = 2 * (o.plan.encoder_length + 1);  // bars of history read before a fold's first window
  for (int64_t k = state.finished; k < static_cast<int64_t>(folds.size()); ++k) {
    if (stop()) {
      outcome.interrupted = true;
      break;
    }
    const Fold& fold = folds[static_cast<size_t>(k)];
    const auto fold_start = std::chrono::steady_clock::now();
    FoldResult result;
    result.fold = fold;
    // How this fold's model comes to be: trained on the bars through the fold's date, an
    // update of the last fold's, or the last fold's as it is.
    const bool fresh = k == 0 || o.refit == Refit::Full;
    const int64_t source_fold = fresh ? k : (o.refit == Refit::Update ? k : 0);
    result.training.kind =
        fresh ? FoldModel::Trained : (o.refit == Refit::Update ? FoldModel::Updated : FoldModel::Kept);
    events.fold_started(fold, result.training.kind);
    nlohmann::json curve = nlohmann::json::array();
    const fs::path starts_from = model_path(o.output, o.refit == Refit::Update ? k - 1 : 0);
    if (!fresh && !fs::exists(starts_from)) {
      throw Error(o.output.string() + ": fold " + std::to_string(k) + " starts from " + starts_from.string() +
                  ", which is missing: start the backtest anew in another folder");
    }
    if (fresh || o.refit == Refit::Update) {
      TrainingRequest request;
      request.source = o.source;
      request.source.through_ns = fold.train_through_ns;
      request.save_model = model_path(o.output, k);
      request.conformal_split = o.split_conformal;
      if (fresh) {
        request.setup = o.setup;
      } else {
        request.setup.train = o.setup.train;
        request.setup.train.epochs = o.update_epochs;
        request.setup.load_model = starts_from;
        request.setup.update = true;
        if (bounded) {
          // The update reads the bars after its model's, with the encoder's history before them.
          const auto file = artifact::load_model_file(starts_from);
          int64_t earliest = fold.train_through_ns;
          if (file.lineage) {
            for (const auto& mark : file.lineage->trained_through) earliest = std::min(earliest, mark.bar_ns);
          }
          request.source.from_ns = bars_before(timeline, earliest, context);
        }
        request.setup.device = o.setup.device;
        request.setup.stop_requested = o.setup.stop_requested;
      }
      TrainingOutcome trained;
      try {
        trained = run_training(request, events.training_events(), events.training_progress());
      } catch (const Interrupted&) {
        outcome.interrupted = true;
        break;
      } catch (const UsageError&) {
        throw;
      } catch (const Error& e) {
        throw Error("fold " + std::to_string(k) + " (bars through " + format_utc(fold.train_through_ns) +
                    "): " + fold_model_name(result.training.kind) + ": " + e.what());
      }
      if (trained.result.interrupted) {
        outcome.interrupted = true;
        break;
      }
      // A full refit's store holds the bars through its fold's date and serves no other
      // fold; fold 0's stays for a rerun of the walk.
      if (o.refit == Refit::Full && k > 0 && !trained.feature_store.empty()) {
        std::error_code ec;
        fs::remove(trained.feature_store, ec);
      }
      result.training.epochs = trained.result.epochs_completed;
      result.training.best_epoch = trained.result.best_epoch;
      result.training.best_val_loss = trained.result.best_val.loss;
      result.training.seconds = trained.result.train_seconds;
      curve = trained.state.history;
    }
    const fs::path trained_model = model_path(o.output, source_fold);
    fs::path scored_model = trained_model;
    if (o.int8) {
      scored_model = int8_path(o.output, source_fold);
      if (source_fold == k) {
        artifact::export_int8_file(artifact::load_model_file(trained_model), trained_model.string(),
                                   scored_model.string());
      }
    }
    const auto forecast_start = std::chrono::steady_clock::now();
    auto loaded = artifact::load_model(scored_model, o.setup.device, o.int8_kernels);
    const auto n = static_cast<int64_t>(timeline.size());
    const int64_t end =
        fold.forecast_until_ns == std::numeric_limits<int64_t>::max()
            ? n
            : std::lower_bound(timeline.begin(), timeline.end(), fold.forecast_until_ns) - timeline.begin();
    const auto& dataset = scoring.under(loaded.file, bars_before(timeline, fold.train_through_ns, context),
                                        timeline[static_cast<size_t>(std::min(n - 1, end - 1 + o.plan.horizon))]);
    const auto windows = fold_windows(dataset, fold.train_through_ns, fold.forecast_until_ns);
    // The fold's rows go to its part as they come, a row group at a time: over a hundred
    // series a fold forecasts millions of rows.
    eval::ForecastRows rows(dataset, static_cast<int32_t>(k), loaded.model->options().quantiles(), with_conformal);
    data::BacktestForecastWriter part(part_path(o.output, k).string(), rows.rows().quantiles, with_conformal);
    eval::ExplanationAccumulator explanation(dataset.schema(), dataset.options());
    double conformal_seconds = 0.0;  // what the offsets cost the fold: their walk, their tallies, their save
    // Split offsets: those the fold's model fitted on its validation split as it trained (its
    // int8 export carries them too).
    std::optional<eval::FixedConformalTallies> split;
    if (o.split_conformal) {
      const auto& calibration = loaded.file.conformal;
      if (!calibration || calibration->method != "split") {
        throw Error(trained_model.string() +
                    ": holds no split conformal offsets (qtft.conformal); the backtest began without "
                    "--conformal split: start it anew in another folder");
      }
      split.emplace(*calibration, loaded.model->options().quantiles());
    }
    const auto evaluation = eval::evaluate_windows_for_desk(
        loaded.model, dataset, data::Split::All, windows, o.forecast_batch_size, loaded.device, o.cost_bps,
        [&](const data::Batch& batch, const model::TftOutput& out) {
          std::vector<double> adaptive_issued;
          at::Tensor split_issued;
          const double* issued = nullptr;
          if (conformal || split) {
            const auto start = std::chrono::steady_clock::now();
            if (conformal) {
              adaptive_issued = conformal->add(dataset, batch, out);
              issued = adaptive_issued.data();
            }
            if (split) {
              split_issued = split->add(dataset, batch, out.quantiles);
              issued = split_issued.data_ptr<double>();
            }
            conformal_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          }
          rows.add(batch, out, with_conformal ? issued : nullptr);
          explanation.add(out);
          if (rows.rows().rows() >= kRowsPerPartWrite) {
            part.write(rows.take());
          }
        });
    part.write(rows.take());
    part.commit();
    const auto now = std::chrono::steady_clock::now();
    result.forecast_seconds = std::chrono::duration<double>(now - forecast_start).count();
    result.metrics = evaluation.metrics;
    result.desk = evaluation.desk;
    result.windows = static_cast<int64_t>(windows.size());
    result.model = scored_model;
    nlohmann::json record = {{"fold", k},
                             {"train_through", format_utc(fold.train_through_ns)},
                             {"forecast_until", utc_or_null(fold.forecast_until_ns)},
                             {"bars", fold.bars},
                             {"windows", windows.size()},
                             {"training",
                              {{"kind", fold_model_name(result.training.kind)},
                               {"epochs", result.training.epochs},
                               {"best_epoch", result.training.best_epoch},
                               {"best_val_loss", result.training.best_val_loss},
                               {"seconds", result.training.seconds},
                               {"curve", curve}}},
                             {"model", fs::relative(scored_model, o.output).string()},
                             {"metrics", eval::to_json(result.metrics)},
                             {"desk", eval::to_json(result.desk, dataset.schema().symbols)},
                             {"explanation", eval::to_json(explanation.result())},
                             {"forecast_seconds", result.forecast_seconds},
                             {"seconds", std::chrono::duration<double>(now - fold_start).count()}};
    if (split) {
      result.raw_coverage = split->raw();
      result.conformal_coverage = split->conformal();
      result.conformal_method = "split";
      record["conformal"] = {{"method", "split"},
                             {"calibration_windows", split->calibration().calibration_windows},
                             {"raw", eval::to_json(*result.raw_coverage, true)},
                             {"conformal", eval::to_json(*result.conformal_coverage, true)},
                             {"seconds", conformal_seconds}};
    }
    if (conformal) {
      result.raw_coverage = conformal->raw();
      result.conformal_coverage = conformal->conformal();
      result.conformal_method = "adaptive";
      record["conformal"] = {{"method", "adaptive"},
                             {"rate", conformal->rate()},
                             {"raw", eval::to_json(*result.raw_coverage, true)},
                             {"conformal", eval::to_json(*result.conformal_coverage, true)}};
      conformal->restart_tallies();
      state.document["conformal_state"] = conformal->to_json();
      // The model that forecast the fold carries the offsets it leaves, for forecasts after it.
      const auto start = std::chrono::steady_clock::now();
      artifact::save_conformal(scored_model, conformal->calibration());
      conformal_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      record["conformal"]["seconds"] = conformal_seconds;
    }
    state.document["folds"].push_back(std::move(record));
    state.document["summary"] = to_json(summarize_folds(state.document["folds"]));
    write_document(o, state.document);
    // Older models are no longer needed to go on (under --refit none, fold 0's is the model).
    if (!o.keep_models) {
      for (int64_t j = 0; j < k; ++j) {
        if (o.refit == Refit::None && j == 0) continue;
        std::error_code ec;
        fs::remove(model_path(o.output, j), ec);
        fs::remove(int8_path(o.output, j), ec);
      }
    }
    events.fold_finished(result, static_cast<int64_t>(folds.size()));
    outcome.folds.push_back(std::move(result));
  }

  const auto finished = static_cast<int64_t>(state.document["folds"].size());
  if (finished == static_cast<int64_t>(folds.size())) {
    std::vector<std::string> parts;
    for (int64_t k = 0; k < finished; ++k) parts.push_back(part_path(o.output, k).string());
    outcome.forecasts = o.output / "forecasts.parquet";
    std::error_code ec;
    if (fs::exists(parts.front(), ec)) {
      data::concatenate_backtest_forecasts(parts, outcome.forecasts.string());
      state.document["complete"] = true;
      write_document(o, state.document);
      fs::remove_all(o.output / "parts", ec);
    } else if (!fs::exists(outcome.forecasts, ec)) {
      throw Error(o.output.string() + ": every fold is recorded, but neither parts/ nor forecasts.parquet is there");
    }
    fs::remove(o.output / "parts", ec);  // left empty by a rerun of a finished backtest
  }
  outcome.finished_folds = finished;
  if (finished > 0) outcome.summary = summarize_folds(state.document["folds"]);
  outcome.record = o.output / "folds.json";
  return outcome;
}

}  // namespace qtft::train
