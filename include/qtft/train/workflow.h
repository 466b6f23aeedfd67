#pragma once

// The training workflow `qtft train` runs, for any program: load or build the model, window
// the bars as the model expects, the QAT preamble (calibrate, freeze), the baselines, and a
// trainer ready to fit, resumed when asked. The program decides what to print (events) and
// what to do on Ctrl-C (Trainer::fit's stop callback).

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "qtft/artifact/model_file.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/regime_coverage.h"
#include "qtft/data/store/feature_store.h"
#include "qtft/eval/baselines.h"
#include "qtft/model/tft.h"
#include "qtft/train/qat_recipe.h"
#include "qtft/train/train_options.h"
#include "qtft/train/trainer.h"

namespace qtft::dist {
class Collective;
}

namespace qtft::train {

struct TrainingSetup {
  data::DatasetOptions dataset;      // a fresh model's windows and splits; a loaded one keeps its own
  model::Architecture architecture;  // a fresh model's
  QatRecipe qat;
  TrainOptions train;
  std::filesystem::path load_model;  // empty: a fresh model; else fine-tune it, or resume its run
  // load_model's contents when the program has read them already (a resume reads its
  // record first), so the file is not read twice.
  std::optional<artifact::ModelFile> model_file;
  bool resume = false;
  // Continue load_model on the bars after those it trained on (its qtft.lineage), with its
  // own features, windows and observers (live, not recalibrated); the newest part of the
  // new bars validates (its validation fraction, no test split).
  bool update = false;
  c10::Device device = c10::Device(c10::kCPU);
  // Polled during the long steps before training (calibration): train::Interrupted ends
  // the preparation, as nothing is worth saving yet. Trainer::fit takes its own callback.
  std::function<bool()> stop_requested;
  // Set: this process is one rank of a data-parallel run (Trainer::set_data_parallel).
  // Every rank prepares the same way from the same data; a stop requested on any rank
  // during calibration ends every rank's preparation.
  std::shared_ptr<dist::Collective> group;
};

// Where an update (TrainingSetup::update) starts: what its model had trained on, and the
// file it came from. Saved with its checkpoints, so that --resume selects the same bars.
struct UpdateOrigin {
  std::vector<artifact::SeriesMark> after;  // the parent's qtft.lineage trained_through
  std::string parent;                       // "<file> fnv1a64:<hex>"
  std::vector<artifact::BarsAdded> added;   // per series, its new bars
  data::DatasetOptions model_windows;       // the parent's own, saved unchanged
};
nlohmann::json to_json(const UpdateOrigin& origin);
UpdateOrigin update_origin_from_json(const nlohmann::json& json);

// What the workflow reports as it goes, in this order; every hook is optional.
class TrainingEvents {
 public:
  virtual ~TrainingEvents() = default;
  // This process is one of `ranks` of a data-parallel run over `backend` ("Gloo", "NCCL"),
  // on `threads` threads, each step taking `batch_size` windows per rank; a QAT run's live
  // observers take their batches in as `observers` says.
  virtual void data_parallel_started(int64_t /*ranks*/, const char* /*backend*/, int /*threads*/, size_t /*batch_size*/,
                                     quant::ObserverUpdate /*observers*/) {}
  // No bars were named: the run trains on the embedded synthetic data.
  virtual void embedded_data_used(const data::BarSource&) {}
  virtual void model_loaded(const std::filesystem::path&) {}
  virtual void feature_store_ready(const data::StorePreparation&) {}
  virtual void data_ready(const data::Dataset&) {}
  virtual void model_ready(const model::TemporalFusionTransformer&, const TrainOptions&) {}
  virtual void calibration_started(int64_t /*batches*/) {}
  // With the market regimes the calibration batches covered.
  virtual void calibration_finished(const model::TemporalFusionTransformer&, const data::RegimeCoverage&) {}
  virtual void observers_frozen(size_t /*observers*/) {}
  virtual void baselines_ready(const eval::BaselineMetrics&) {}
  virtual void resumed(const artifact::TrainingState&) {}
  virtual void two_phase_planned(const TwoPhasePlan&) {}
  // An update's new bars per series, before the data is windowed.
  virtual void update_planned(const UpdateOrigin&) {}
  // The FP32 phase ended; its best epoch's weights are quantized (calibration events follow).
  virtual void qat_phase_started(const TwoPhasePlan&, int64_t /*fp32_best_epoch*/) {}
};

// A file removed when the last owner lets it go (errors ignored: it is scratch).
struct RemovedWhenDone {
  explicit RemovedWhenDone(std::string path) : path(std::move(path)) {}
  ~RemovedWhenDone();
  RemovedWhenDone(const RemovedWhenDone&) = delete;
  RemovedWhenDone& operator=(const RemovedWhenDone&) = delete;
  std::string path;
};

struct PreparedTraining {
  // An update's feature store holds its bars alone and serves no other run: removed once
  // the run is done with it (by the rank that built it).
  std::shared_ptr<const RemovedWhenDone> update_store;
  std::shared_ptr<const data::Dataset> dataset;
  std::string feature_store;  // the store the dataset maps, kept for other runs; "" for none
  model::TemporalFusionTransformer model{nullptr};
  TrainOptions train;               // as the run uses them: a resumed run's own, with this run's epochs
  eval::BaselineMetrics baselines;  // on the validation split
  std::unique_ptr<Trainer> trainer;
  // A --two-phase run from FP32 still in its FP32 phase: fit_training switches to QAT.
  std::optional<TwoPhasePlan> pending_qat_phase;
  std::optional<UpdateOrigin> update;                        // an update run
  std::optional<data::RegimeCoverage> calibration_coverage;  // the last calibration's, if any
  c10::Device device = c10::Device(c10::kCPU);
  std::shared_ptr<dist::Collective> group;
};

// What `source` and `setup` decide of the models trained from them (the data read, the
// windows, a fresh model's architecture, the training and QAT options; not the device, the
// evaluation batch size or checkpointing, which change no number), as JSON: a backtest or a
// search resumes only under the same.
nlohmann::json training_identity(const data::BarSource& source, const TrainingSetup& setup);

// Checks the setup's options (UsageError naming the flag): cheap, so a program can call it
// before loading any data. prepare_training checks again.
void check_training_setup(const TrainingSetup& setup);

// Prepares the run: load or build the model, window the source's bars (from its feature
// store when it has one: under data parallelism rank 0 builds it while the others wait,
// then every rank maps the same file), the QAT preamble, baselines, the trainer (resumed
// with setup.resume).
PreparedTraining prepare_training(const data::BarSource& source, TrainingSetup setup, TrainingEvents& events);

// Trains the prepared run to its end: one fit, or for a two-phase run from FP32 the FP32
// phase, then the QAT phase (start_qat_phase). A stop requested during the QAT phase's
// calibration ends the run as interrupted after the FP32 phase, which is saved and resumes
// into the QAT phase.
TrainResult fit_training(PreparedTraining& run, ProgressReporter& progress, TrainingEvents& events,
                         const std::function<bool()>& stop_requested = {});

// The QAT phase of a run from FP32: a QAT model at the plan's bit widths holding
// `fp32_weights`, its observers calibrated on that trained network (frozen at once when the
// plan has no live epochs), and a trainer that takes over where `fp32_state` paused.
struct QatPhase {
  model::TemporalFusionTransformer model{nullptr};
  std::unique_ptr<Trainer> trainer;
  std::optional<data::RegimeCoverage> calibration_coverage;
};
QatPhase start_qat_phase(const model::TftOptions& fp32_options, const artifact::NamedTensors& fp32_weights,
                         const artifact::TrainingState& fp32_state, const TwoPhasePlan& plan, const TrainOptions& train,
                         const std::shared_ptr<const data::Dataset>& dataset, c10::Device device,
                         const std::shared_ptr<dist::Collective>& group, TrainingEvents& events,
                         const std::function<bool()>& stop_requested = {});

// What a run saves: its configuration, features, windows, the best weights, the state that
// --resume continues from, and its lineage: per series the last bar it trained on (an
// update: merged with its parent's, which it names, with the bars it added).
artifact::ModelFile training_model_file(const PreparedTraining& run);

// The QAT preamble on a model: observers that have seen no data are calibrated on
// `recipe.calibration_batches` training batches; with freeze_observers they are then frozen.
// Returns the calibration's regime coverage when it calibrated. The calibration takes its
// batches in as `update` says (calibrate_observers), as the training that follows will, a
// global batch of batch_size per rank across `ranks`.
std::optional<data::RegimeCoverage> prepare_observers(
    model::TemporalFusionTransformer& model, const data::Dataset& dataset, const QatRecipe& recipe, size_t batch_size,
    uint64_t seed, c10::Device device, TrainingEvents& events, const std::function<bool()>& stop_requested = {},
    quant::ObserverUpdate update = quant::ObserverUpdate::Immediate, const dist::Ranks& ranks = dist::Ranks());

// Post-training quantization of a QAT-converted model: calibrate on `batches` training
// batches, then freeze. PTQ in `qtft quantize` and in the accuracy comparison. Returns
// which market regimes those batches covered.
data::RegimeCoverage post_training_quantize(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                            int64_t batches, size_t batch_size, uint64_t seed, c10::Device device);

}  // namespace qtft::train
