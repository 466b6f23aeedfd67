#include "qtft/train/workflow.h"

#include <algorithm>

#include "qtft/common/error.h"
#include "qtft/dist/data_parallel.h"
#include "qtft/infer/model_io.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"

namespace qtft::train {

void QatRecipe::apply_to(TrainOptions& train) {
  if (!two_phase) return;
  use_qat = true;
  if (live_epochs < 1 || live_epochs >= train.epochs) {
    throw UsageError("--two-phase needs --qat-live-epochs between 1 and --epochs - 1, got " +
                     std::to_string(live_epochs) + " with --epochs " + std::to_string(train.epochs));
  }
  train.freeze_observers_after_epochs = live_epochs;
}

void prepare_observers(model::TemporalFusionTransformer& model, const data::Dataset& dataset, const QatRecipe& recipe,
                       size_t batch_size, uint64_t seed, c10::Device device, TrainingEvents& events,
                       const std::function<bool()>& stop_requested) {
  auto stats = quant::observer_stats(*model);
  const bool fresh = std::all_of(stats.begin(), stats.end(), [](const auto& s) { return s.samples == 0; });
  if (fresh && recipe.calibration_batches > 0) {
    events.calibration_started(recipe.calibration_batches);
    calibrate_observers(model, dataset, recipe.calibration_batches, batch_size, seed, device, stop_requested);
    events.calibration_finished(model);
  }
  if (recipe.freeze_observers) {
    quant::freeze_observers(*model);
    events.observers_frozen(stats.size());
  }
}

void post_training_quantize(model::TemporalFusionTransformer& model, const data::Dataset& dataset, int64_t batches,
                            size_t batch_size, uint64_t seed, c10::Device device) {
  if (batches < 1) throw UsageError("--calibration-batches must be at least 1, got " + std::to_string(batches));
  if (quant::observers_frozen(*model)) throw Error("its observers are already frozen; quantize the FP32 model instead");
  calibrate_observers(model, dataset, batches, batch_size, seed, device);
  quant::freeze_observers(*model);
}

void check_training_setup(const TrainingSetup& setup) {
  auto train = setup.train;
  auto qat = setup.qat;
  qat.apply_to(train);
  train.validate();
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
}

namespace {

data::Dataset open_training_data(const data::BarSource& source, const TrainingSetup& setup,
                                 const std::optional<infer::LoadedModel>& loaded, TrainingEvents& events) {
  const auto& options = loaded ? loaded->file.dataset : setup.dataset;
  const data::FeatureSpec* saved = loaded ? &loaded->file.features : nullptr;
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
  // The other ranks wait for the store, then map the same file: one copy of the data per
  // machine. A builder that failed still meets them, and they fail with it.
  if (setup.group) {
    const auto ok = dist::all_ranks_agree(*setup.group, !failed);
    if (!ok && !failed) throw Error("the feature store was not built: rank 0 failed (see its error)");
  }
  if (failed) std::rethrow_exception(failed);
  if (!builder) store = data::prepare_feature_store(source, options, saved, data::StoreAccess::MustExist);
  events.feature_store_ready(*store);
  return data::map_feature_store(store->path);
}

}  // namespace

PreparedTraining prepare_training(const data::BarSource& source, TrainingSetup setup, TrainingEvents& events) {
  check_training_setup(setup);
  setup.qat.apply_to(setup.train);

  std::optional<infer::LoadedModel> loaded;
  if (!setup.load_model.empty()) {
    loaded = setup.model_file
                 ? infer::model_from_file(std::move(*setup.model_file), setup.load_model.string(), setup.device)
                 : infer::load_model(setup.load_model, setup.device);
    if (loaded->file.int8_weights) {
      throw Error(setup.load_model.string() + ": an int8 export serves forecasts and cannot be trained; train the QAT "
                  "model it was exported from");
    }
    events.model_loaded(setup.load_model);
    if (setup.resume) {
      if (!loaded->file.training) throw Error(setup.load_model.string() + ": holds no training state to --resume from");
      // The saved options decide which batches come next; only --epochs may grow.
      setup.train = train_options_from_json(loaded->file.training->config, setup.train);
    }
  }
  PreparedTraining run;
  run.dataset = std::make_shared<const data::Dataset>(open_training_data(source, setup, loaded, events));
  events.data_ready(*run.dataset);

  if (loaded && setup.qat.use_qat && !setup.resume) {
    infer::convert_to_qat(*loaded, setup.qat.weight_bits, setup.qat.activation_bits, setup.device);
  }
  if (loaded) {
    run.model = loaded->model;
  } else {
    model::TftOptions options = infer::model_options_for(*run.dataset);
    setup.architecture.apply_to(options);
    options.use_qat(setup.qat.use_qat).weight_bits(setup.qat.weight_bits).activation_bits(setup.qat.activation_bits);
    run.model = infer::build_model(options, setup.train.seed);
  }
  events.model_ready(run.model, setup.train);
  if (run.model->options().use_qat() && !setup.resume) {
    // Every rank calibrates on the same batches, so their observers agree before training.
    const auto stop = dist::stop_on_any_rank(setup.group, setup.stop_requested);
    prepare_observers(run.model, *run.dataset, setup.qat, setup.train.batch_size, setup.train.seed, setup.device,
                      events, stop);
  }

  run.baselines = eval::evaluate_baselines(*run.dataset, data::Split::Validation, run.model->options().quantiles());
  events.baselines_ready(run.baselines);

  run.trainer = std::make_unique<Trainer>(run.model, run.dataset, setup.train, setup.device);
  if (setup.group) run.trainer->set_data_parallel(setup.group);
  if (setup.resume) {
    const auto& state = *loaded->file.training;
    run.trainer->resume_from(state, loaded->file.weights);
    events.resumed(state);
  }
  run.train = setup.train;
  return run;
}

infer::ModelFile training_model_file(const PreparedTraining& run) {
  return {run.model->options(), run.dataset->spec(), run.dataset->options(), run.trainer->best_weights(),
          run.trainer->state()};
}

}  // namespace qtft::train
