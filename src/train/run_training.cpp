#include "qtft/train/run_training.h"

#include <ATen/Parallel.h>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/dist/ranks.h"
#include "qtft/eval/conformal_evaluation.h"
#include "qtft/io/atomic_file.h"
#include "qtft/model/model_building.h"

namespace qtft::train {
namespace {

nlohmann::json metrics_document(const TrainingOutcome& o, const model::TftOptions& options,
                                const data::BarSource& source) {
  const auto& best = o.result.best_val;
  nlohmann::json j{
      {"config",
       {{"model", model::to_json(options)}, {"training", to_json(o.train)}, {"data", data::describe_source(source)}}},
      {"epochs", o.state.history},
      {"best_epoch", o.result.best_epoch},
      {"val_loss", best.loss},
      {"val_rmse", best.rmse},
      {"val_mae", best.mae},
      {"val_p50", best.p50},
      {"val_p90", best.p90},
      {"val_in_target_units", eval::to_json(best.in_target_units)},
      {"baseline_val_loss", o.baselines.best().loss},
      {"baselines", eval::to_json(o.baselines)},
      {"parameters", o.parameters},
      {"train_seconds", o.result.train_seconds},
      {"stopped_early", o.result.stopped_early}};
  if (o.calibration_coverage) j["calibration_coverage"] = data::to_json(*o.calibration_coverage);
  if (!options.observed_categories().empty() || !options.known_categories().empty() ||
      !options.static_categories().empty())
    j["unknown_category_rows"] = o.unknown_category_rows;
  return j;
}

}  // namespace

dist::Backend data_parallel_backend(DeviceChoice choice) {
  return choice == DeviceChoice::Cuda ? dist::Backend::nccl : dist::Backend::gloo;
}

c10::Device training_device(DeviceChoice choice, const std::shared_ptr<dist::Collective>& group) {
  auto device = artifact::resolve_device(choice);
  if (!group) return device;
  // NCCL's ranks train on their own GPUs; Gloo's on the CPU (--device auto among them).
  return group->device();
}

TrainingOutcome run_training(const TrainingRequest& request, TrainingEvents& events, ProgressReporter& progress) {
  const auto& setup = request.setup;
  const auto& group = setup.group;
  TrainingOutcome outcome;
  const dist::Ranks ranks(group);
  outcome.leader = ranks.leader();
  outcome.ranks = ranks.count();
  TrainingEvents quiet;
  ProgressReporter silent;
  TrainingEvents& shown = outcome.leader ? events : quiet;
  ProgressReporter& shown_progress = outcome.leader ? progress : silent;

  check_training_setup(setup);  // flags before data
  // Two runs saving to one file would overwrite each other's work: the second stops here.
  // (Without a save path only an interrupt writes, to kInterruptedCheckpoint.)
  std::optional<io::OutputLock> lock;
  if (outcome.leader && !request.save_model.empty()) lock.emplace(request.save_model);
  if (outcome.ranks > 1) {
    shown.data_parallel_started(outcome.ranks, group->backend() == dist::Backend::nccl ? "NCCL" : "Gloo",
                                at::get_num_threads(), setup.train.batch_size,
                                resolve_observer_update(setup.train.observer_update, outcome.ranks));
  }
  if (request.source.uses_embedded_data()) shown.embedded_data_used(request.source);

  auto run = prepare_training(request.source, setup, shown);
  outcome.parameters = model::count_parameters(*run.model);
  outcome.baselines = run.baselines;
  outcome.train = run.train;
  outcome.result = fit_training(run, shown_progress, shown, setup.stop_requested);
  outcome.calibration_coverage = run.calibration_coverage;
  outcome.unknown_category_rows = run.dataset->notes().unknown_category_rows;
  outcome.feature_store = run.feature_store;

  auto file = training_model_file(run);
  RunRecord record = request.record;
  record.ranks = outcome.ranks;
  record.save_model = request.save_model.empty() ? "" : std::filesystem::absolute(request.save_model).string();
  file.training->run = to_json(record);
  outcome.state = *file.training;
  const auto save = [&](const std::filesystem::path& path) {
    if (request.save) {
      request.save(path, file);
    } else {
      artifact::save_model_file(path, file);
    }
    outcome.saved_to = path;
  };
  if (outcome.leader) {
    if (outcome.result.interrupted) {
      save(request.save_model.empty() ? std::filesystem::path(kInterruptedCheckpoint) : request.save_model);
      if (!outcome.result.out_of_memory.empty()) {
        // Saved as on a stop; the run ends as an error that says where to go on from.
        const std::string path = outcome.saved_to.string();
        throw Error(outcome.result.out_of_memory + "; the run so far is saved in " + path +
                    " (qtft train --resume --load-model " + path + " continues it)");
      }
    } else {
      if (request.conformal_split) {
        auto trained = artifact::model_from_file(file, "the trained model", run.device);
        const auto fitted = eval::fit_split_offsets(trained.model, *run.dataset, data::Split::Validation,
                                                    run.train.eval_batch_size, trained.device);
        file.conformal = artifact::ConformalCalibration{
            "split", 0.0, fitted.windows, {{artifact::kAllSymbols, fitted.offsets.offsets}}};
        outcome.conformal_windows = fitted.windows;
      }
      if (!request.save_model.empty()) save(request.save_model);
      if (!request.metrics_json.empty()) {
        const auto metrics = metrics_document(outcome, file.options, request.source);
        io::write_file_atomically(request.metrics_json, metrics.dump(2) + "\n");
      }
    }
  }
  // A rank other than the leader that ran out saves nothing; it ends as an error too, before
  // the barrier its partners, still in the step's collectives, would never reach.
  if (!outcome.leader && !outcome.result.out_of_memory.empty()) throw Error(outcome.result.out_of_memory);
  // The other ranks wait until the leader's files are complete: a launcher that sees one
  // worker end may stop the rest.
  ranks.barrier();
  return outcome;
}

}  // namespace qtft::train
