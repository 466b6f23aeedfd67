#include "qtft/train/workflow.h"
#include "qtft/model/model_building.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/detail/fingerprint.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/features/regime_coverage.h"
#include "qtft/dist/detail/data_parallel.h"
#include "qtft/dist/ranks.h"
#include "qtft/memory/autocast.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/detail/update.h"

namespace qtft::train {

std::optional<data::RegimeCoverage> prepare_observers(model::TemporalFusionTransformer& model,
                                                      const data::Dataset& dataset, const QatRecipe& recipe,
                                                      size_t batch_size, uint64_t seed, c10::Device device,
                                                      TrainingEvents& events,
                                                      const std::function<bool()>& stop_requested,
                                                      quant::ObserverUpdate update, const dist::Ranks& ranks) {
  auto stats = quant::observer_stats(*model);
  const bool fresh = std::all_of(stats.begin(), stats.end(), [](const auto& s) { return s.samples == 0; });
  std::optional<data::RegimeCoverage> coverage;
  if (fresh && recipe.calibration_batches > 0) {
    events.calibration_started(recipe.calibration_batches);
    calibrate_observers(model, dataset, recipe.calibration_batches, batch_size, seed, device, stop_requested, update,
                        ranks);
    coverage = data::calibration_coverage(dataset, recipe.calibration_batches,
                                          batch_size * static_cast<size_t>(ranks.count()), seed);
    events.calibration_finished(model, *coverage);
  }
  if (recipe.freeze_observers) {
    quant::freeze_observers(*model);
    events.observers_frozen(stats.size());
  }
  return coverage;
}

data::RegimeCoverage post_training_quantize(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                            int64_t batches, size_t batch_size, uint64_t seed, c10::Device device) {
  if (batches < 1) throw UsageError("--calibration-batches must be at least 1, got " + std::to_string(batches));
  if (quant::observers_frozen(*model)) throw Error("its observers are already frozen; quantize the FP32 model instead");
  calibrate_observers(model, dataset, batches, batch_size, seed, device);
  quant::freeze_observers(*model);
  return data::calibration_coverage(dataset, batches, batch_size, seed);
}

void check_training_setup(const TrainingSetup& setup) {
  auto train = setup.train;
  auto qat = setup.qat;
  // Whether a loaded model is FP32 is known once it is read; prepare_training plans then.
  const bool from_fp32 = qat.two_phase && qat.start == QatStart::Fp32;
  if (from_fp32 && setup.load_model.empty()) {
    plan_two_phase(qat, train, false);
    qat.use_qat = true;
  } else if (!from_fp32) {
    qat.apply_to(train);
  }
  train.validate();
  memory::require_precision_support(train.precision, setup.device);  // before the data loads
  setup.dataset.validate();
  if (setup.load_model.empty()) {
    // The architecture as a fresh model would get it (sizes from the data do not matter
    // here): --quantiles, --hidden-size, ... fail now, not after the data has loaded.
    model::TftOptions probe(1, 1, 1, setup.dataset.encoder_length, setup.dataset.horizon);
    setup.architecture.apply_to(probe);
    probe.use_qat(qat.use_qat).weight_bits(qat.weight_bits).activation_bits(qat.activation_bits);
    probe.validate();
  }
  if (setup.resume && setup.load_model.empty()) {
    throw UsageError("--resume needs --load-model FILE (the checkpoint to continue)");
  }
  if (setup.update) {
    if (setup.load_model.empty()) throw UsageError("--update needs --load-model FILE (the model to continue)");
    if (setup.resume) throw UsageError("--update starts an update; --resume alone continues an interrupted one");
    if (setup.qat.use_qat || setup.qat.two_phase || setup.qat.freeze_observers) {
      throw UsageError(
          "--update continues the model as it is (its observers live): drop --use-qat, --two-phase and "
          "--freeze-qat-observers");
    }
  }
}

nlohmann::json to_json(const UpdateOrigin& origin) {
  return {{"after", artifact::to_json(artifact::Lineage{"", origin.after, origin.parent, origin.added})},
          {"windows", data::to_json(origin.model_windows)}};
}

UpdateOrigin update_origin_from_json(const nlohmann::json& json) {
  try {
    auto lineage = artifact::lineage_from_json(json.at("after"));
    return {lineage.trained_through, lineage.parent, lineage.added,
            data::dataset_options_from_json(json.at("windows"))};
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("model file: malformed update record: ") + e.what());
  }
}

RemovedWhenDone::~RemovedWhenDone() {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

namespace {

// Windows `source` with `options` (and a loaded model's `saved` spec): from its feature store
// when it has one (under data parallelism rank 0 builds it while the others wait, then every
// rank maps the same file: one copy of the data per machine), else in memory.
data::Dataset open_source_data(const data::BarSource& source, const data::DatasetOptions& options,
                               const data::InputSchema* saved, const TrainingSetup& setup, TrainingEvents& events,
                               std::string* store_path = nullptr) {
  if (source.feature_store_folder().empty()) return data::open_dataset(source, options, saved);
  const bool builder = !setup.group || setup.group->rank() == 0;
  std::optional<data::StorePreparation> store;
  std::exception_ptr failed;
  if (builder) {
    try {
      store = data::prepare_feature_store(source, options, saved);
    } catch (...) {
      failed = std::current_exception();
    }
  }
  // A builder that failed still meets the other ranks, and they fail with it.
  if (setup.group) {
    const auto ok = dist::all_ranks_agree(*setup.group, !failed);
    if (!ok && !failed) throw Error("the feature store was not built: rank 0 failed (see its error)");
  }
  if (failed) std::rethrow_exception(failed);
  if (!builder) store = data::prepare_feature_store(source, options, saved, data::StoreAccess::MustExist);
  events.feature_store_ready(*store);
  if (store_path && builder) *store_path = store->path;
  return data::map_feature_store(store->path, options);
}

std::string too_few_new_bars(const std::vector<artifact::BarsAdded>& added, const std::vector<int64_t>& new_bars,
                             const Error& e) {
  std::string counts;
  for (size_t i = 0; i < added.size(); ++i) {
    counts += (counts.empty() ? "" : ", ") + added[i].symbol + " " + std::to_string(new_bars[i]);
  }
  return "--update: too few new bars (" + counts + ") to train and validate on: " + e.what();
}

// An update's data: the bars after the model's, windowed with its spec; the newest
// validate and none test. A source with a feature store is read a part at a time to find
// them, and they alone go to a store of their own: an update after a model that validated
// on millions of bars (a backtest's first) needs no memory for them. `store_path`: that
// store, which serves no other run.
data::Dataset open_update_data(const data::BarSource& given, UpdateOrigin& origin, const data::InputSchema& spec,
                               const TrainingSetup& setup, TrainingEvents& events, std::string& store_path) {
  const auto source = data::with_model_inputs(given, spec);
  const int64_t context = origin.model_windows.encoder_length + 1;
  auto options = origin.model_windows;
  options.test_fraction = 0;
  if (!source.feature_store_folder().empty()) {
    if (auto starts = find_bars_after(source, origin.after, context)) {
      origin.added = starts->added;
      auto selected = source;
      selected.series_from_ns = starts->from_ns;
      try {
        return open_source_data(selected, options, &spec, setup, events, &store_path);
      } catch (const Error& e) {
        throw Error(too_few_new_bars(starts->added, starts->new_bars, e));
      }
    }
  }
  auto selected = bars_after(data::load_bars(source), origin.after, context);
  origin.added = selected.added;
  try {
    return data::Dataset::build(selected.bars, options, spec);
  } catch (const Error& e) {
    std::vector<int64_t> new_bars;
    for (size_t i = 0; i < selected.bars.series.size(); ++i) {
      const auto& ts = selected.bars.series[i].timestamp_ns;
      new_bars.push_back(ts.end() - std::lower_bound(ts.begin(), ts.end(), selected.added[i].first_bar_ns));
    }
    throw Error(too_few_new_bars(selected.added, new_bars, e));
  }
}

}  // namespace

PreparedTraining prepare_training(const data::BarSource& source, TrainingSetup setup, TrainingEvents& events) {
  check_training_setup(setup);

  std::optional<artifact::LoadedModel> loaded;
  std::optional<TwoPhasePlan> plan;  // a run from FP32, planned once the loaded model's kind is known
  std::optional<UpdateOrigin> update;
  if (!setup.load_model.empty()) {
    loaded = setup.model_file
                 ? artifact::model_from_file(std::move(*setup.model_file), setup.load_model.string(), setup.device)
                 : artifact::load_model(setup.load_model, setup.device);
    if (loaded->file.int8_weights) {
      throw Error(setup.load_model.string() +
                  ": an int8 export serves forecasts and cannot be trained; train the QAT "
                  "model it was exported from");
    }
    events.model_loaded(setup.load_model);
    if (setup.update) {
      if (!loaded->file.lineage) {
        throw Error(setup.load_model.string() +
                    ": records no bars it trained on (no qtft.lineage: saved before qtft "
                    "kept one, or not by qtft train); fine-tune it without --update, or train it again");
      }
      update = UpdateOrigin{loaded->file.lineage->trained_through,
                            setup.load_model.filename().string() + " fnv1a64:" + file_fingerprint(setup.load_model),
                            {},
                            loaded->file.dataset};
    }
    if (setup.resume) {
      if (!loaded->file.training) throw Error(setup.load_model.string() + ": holds no training state to --resume from");
      // The saved options decide which batches come next; only --epochs may grow.
      const auto& config = loaded->file.training->config;
      setup.train = train_options_from_json(config, setup.train);
      // Saved in the FP32 phase of a two-phase run: the QAT phase is still to come.
      if (config.contains("qat_phase")) plan = two_phase_plan_from_json(config.at("qat_phase"));
      // Saved by an update: the same bars are selected again.
      if (config.contains("update")) update = update_origin_from_json(config.at("update"));
    }
  }
  if (!setup.resume) {
    const bool fp32_loaded = loaded && !loaded->file.options.use_qat();
    plan = plan_two_phase(setup.qat, setup.train, fp32_loaded);
    if (plan && fp32_loaded) {
      // The loaded model is the FP32 phase: this run is the QAT phase alone.
      setup.qat.use_qat = true;
      setup.qat.freeze_observers = plan->live_epochs == 0;
      setup.train = plan->fine_tuning(setup.train);
    } else if (!plan) {
      setup.qat.apply_to(setup.train);  // from scratch, or a QAT model fine-tuned
    }
  }
  // The FP32 phase is still to train: it goes first, as an FP32 model.
  const bool fp32_phase = plan && plan->fp32_epochs > 0;
  if (fp32_phase) setup.qat.use_qat = false;
  if (plan) events.two_phase_planned(*plan);

  PreparedTraining run;
  run.device = setup.device;
  run.group = setup.group;
  if (update) {
    std::string store;
    run.dataset = std::make_shared<const data::Dataset>(
        open_update_data(source, *update, loaded->file.features, setup, events, store));
    if (!store.empty()) run.update_store = std::make_shared<const RemovedWhenDone>(store);
    events.update_planned(*update);
    run.update = update;
  } else {
    const auto& options = loaded ? loaded->file.dataset : setup.dataset;
    run.dataset = std::make_shared<const data::Dataset>(open_source_data(
        source, options, loaded ? &loaded->file.features : nullptr, setup, events, &run.feature_store));
  }
  events.data_ready(*run.dataset);

  if (loaded && setup.qat.use_qat && !setup.resume) {
    artifact::convert_to_qat(*loaded, setup.qat.weight_bits, setup.qat.activation_bits, setup.device);
  }
  if (loaded) {
    run.model = loaded->model;
  } else {
    const auto options = model::model_options_for(*run.dataset, setup.architecture, setup.qat.use_qat,
                                                  setup.qat.weight_bits, setup.qat.activation_bits);
    run.model = model::build_model(options, setup.train.seed);
    // Built on the CPU (the same initial weights on every device); on its device before
    // anything runs it, calibration first.
    run.model->to(setup.device);
  }
  run.model->set_precision(setup.train.precision);  // calibration multiplies as training will
  events.model_ready(run.model, setup.train);
  // An update keeps learning the ranges: the observers' moving averages go on from the file.
  if (update && !setup.resume) quant::unfreeze_observers(*run.model);
  if (run.model->options().use_qat() && !setup.resume) {
    // Each rank calibrates on its share of every global batch, as it trains, and the batch's
    // one collective gives every rank's observers the same update and every rank the stop.
    const dist::Ranks ranks(setup.group);
    const auto update = resolve_observer_update(setup.train.observer_update, ranks.count());
    run.calibration_coverage =
        prepare_observers(run.model, *run.dataset, setup.qat, setup.train.batch_size, setup.train.seed, setup.device,
                          events, setup.stop_requested, update, ranks);
  }

  run.baselines = eval::evaluate_baselines(*run.dataset, data::Split::Validation, run.model->options().quantiles());
  events.baselines_ready(run.baselines);

  run.trainer = std::make_unique<Trainer>(run.model, run.dataset, setup.train, setup.device);
  run.trainer->set_data_parallel(setup.group);
  if (setup.resume) {
    const auto& state = *loaded->file.training;
    run.trainer->resume_from(state, loaded->file.weights);
    events.resumed(state);
  }
  if (fp32_phase) {
    run.trainer->pause_after_epoch(plan->fp32_epochs);
    run.pending_qat_phase = plan;
  }
  run.train = setup.train;
  return run;
}

QatPhase start_qat_phase(const model::TftOptions& fp32_options, const artifact::NamedTensors& fp32_weights,
                         const artifact::TrainingState& fp32_state, const TwoPhasePlan& plan, const TrainOptions& train,
                         const std::shared_ptr<const data::Dataset>& dataset, c10::Device device,
                         const std::shared_ptr<dist::Collective>& group, TrainingEvents& events,
                         const std::function<bool()>& stop_requested) {
  QatPhase phase;
  phase.model = artifact::quantized_model(fp32_options, fp32_weights, plan.weight_bits, plan.activation_bits, device,
                                          "the FP32 phase's weights");
  phase.model->set_precision(train.precision);
  QatRecipe recipe;
  recipe.calibration_batches = plan.calibration_batches;
  recipe.freeze_observers = plan.live_epochs == 0;
  // Each rank calibrates on its share of every global batch (prepare_training says why).
  const dist::Ranks ranks(group);
  const auto update = resolve_observer_update(train.observer_update, ranks.count());
  phase.calibration_coverage = prepare_observers(phase.model, *dataset, recipe, train.batch_size, train.seed, device,
                                                 events, stop_requested, update, ranks);
  phase.trainer = std::make_unique<Trainer>(phase.model, dataset, plan.fine_tuning(train), device);
  phase.trainer->set_data_parallel(group);
  phase.trainer->continue_after(fp32_state);
  return phase;
}

TrainResult fit_training(PreparedTraining& run, ProgressReporter& progress, TrainingEvents& events,
                         const std::function<bool()>& stop_requested) {
  auto result = run.trainer->fit(progress, stop_requested);
  if (!run.pending_qat_phase || result.interrupted) return result;
  const TwoPhasePlan plan = *run.pending_qat_phase;
  events.qat_phase_started(plan, result.best_epoch);
  QatPhase phase;
  try {
    phase = start_qat_phase(run.model->options(), run.trainer->best_weights(), run.trainer->state(), plan, run.train,
                            run.dataset, run.device, run.group, events, stop_requested);
  } catch (const Interrupted&) {
    // The FP32 phase is complete and worth keeping: saved as it is, it resumes into this.
    result.interrupted = true;
    return result;
  }
  run.model = phase.model;
  run.trainer = std::move(phase.trainer);
  if (phase.calibration_coverage) run.calibration_coverage = phase.calibration_coverage;
  run.train = plan.fine_tuning(run.train);
  run.pending_qat_phase.reset();
  const double fp32_seconds = result.train_seconds;
  result = run.trainer->fit(progress, stop_requested);
  result.train_seconds += fp32_seconds;
  return result;
}

namespace {

// Per series, the last bar of the training split: what this run trained on.
artifact::Lineage lineage_of(const PreparedTraining& run) {
  artifact::Lineage lineage;
  const auto& dataset = *run.dataset;
  lineage.source = dataset.source();
  if (run.update) {
    lineage.trained_through = run.update->after;
    lineage.parent = run.update->parent;
    lineage.added = run.update->added;
  }
  for (const auto& series : dataset.series()) {
    const int64_t train_end = series.split_bounds[1];
    if (train_end <= 0) continue;
    artifact::SeriesMark mark{series.symbol, 0, 0.0};
    dataset.copy(series.timestamp_ns.subspan(static_cast<size_t>(train_end - 1), 1), &mark.bar_ns);
    dataset.copy(series.close.subspan(static_cast<size_t>(train_end - 1), 1), &mark.close);
    auto& marks = lineage.trained_through;
    auto same = std::find_if(marks.begin(), marks.end(), [&](const auto& m) { return m.symbol == mark.symbol; });
    if (same == marks.end()) {
      marks.push_back(mark);
    } else {
      *same = mark;
    }
    for (auto& added : lineage.added) {
      if (added.symbol == mark.symbol) added.last_bar_ns = mark.bar_ns;
    }
  }
  return lineage;
}

}  // namespace

artifact::ModelFile training_model_file(const PreparedTraining& run) {
  artifact::ModelFile file{run.model->options(), run.dataset->schema(), run.dataset->options(),
                           run.trainer->best_weights(), run.trainer->state()};
  // Still in the FP32 phase: --resume finishes it, then goes on to the QAT phase.
  if (run.pending_qat_phase) file.training->config["qat_phase"] = to_json(*run.pending_qat_phase);
  if (run.update) {
    file.dataset = run.update->model_windows;  // the model's windows, not the update's split
    file.training->config["update"] = to_json(*run.update);
  }
  file.lineage = lineage_of(run);
  return file;
}

}  // namespace qtft::train
