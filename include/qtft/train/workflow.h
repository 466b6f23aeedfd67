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
#include <optional>
#include <string>

#include "qtft/data/bar_source.h"
#include "qtft/data/dataset.h"
#include "qtft/data/feature_store.h"
#include "qtft/eval/baselines.h"
#include "qtft/infer/model_file.h"
#include "qtft/model/tft.h"
#include "qtft/train/train_options.h"
#include "qtft/train/trainer.h"

namespace qtft::dist {
class Collective;
}

namespace qtft::train {

// Quantization-aware training as users of the earlier tool ask for it.
struct QatRecipe {
  bool use_qat = false;
  int64_t weight_bits = 8;
  int64_t activation_bits = 8;
  int64_t calibration_batches = 100;  // fresh observers see this many batches before training
  bool freeze_observers = false;      // frozen from the first step
  bool two_phase = false;             // calibrate, live_epochs with live observers, then frozen
  int64_t live_epochs = 1;
  // Two-phase turns QAT on and freezes the observers after live_epochs, which must leave at
  // least one frozen epoch of train.epochs. Throws UsageError naming the flags.
  void apply_to(TrainOptions& train);
};

struct TrainingSetup {
  data::DatasetOptions dataset;     // a fresh model's windows and splits; a loaded one keeps its own
  model::Architecture architecture;  // a fresh model's
  QatRecipe qat;
  TrainOptions train;
  std::filesystem::path load_model;  // empty: a fresh model; else fine-tune it, or resume its run
  // load_model's contents when the program has read them already (a resume reads its
  // record first), so the file is not read twice.
  std::optional<infer::ModelFile> model_file;
  bool resume = false;
  c10::Device device = c10::Device(c10::kCPU);
  // Polled during the long steps before training (calibration): train::Interrupted ends
  // the preparation, as nothing is worth saving yet. Trainer::fit takes its own callback.
  std::function<bool()> stop_requested;
  // Set: this process is one rank of a data-parallel run (Trainer::set_data_parallel).
  // Every rank prepares the same way from the same data; a stop requested on any rank
  // during calibration ends every rank's preparation.
  std::shared_ptr<dist::Collective> group;
};

// What the workflow reports as it goes, in this order; every hook is optional.
class TrainingEvents {
 public:
  virtual ~TrainingEvents() = default;
  virtual void model_loaded(const std::filesystem::path&) {}
  virtual void feature_store_ready(const data::StorePreparation&) {}
  virtual void data_ready(const data::Dataset&) {}
  virtual void model_ready(const model::TemporalFusionTransformer&, const TrainOptions&) {}
  virtual void calibration_started(int64_t /*batches*/) {}
  virtual void calibration_finished(const model::TemporalFusionTransformer&) {}
  virtual void observers_frozen(size_t /*observers*/) {}
  virtual void baselines_ready(const eval::BaselineMetrics&) {}
  virtual void resumed(const infer::TrainingState&) {}
};

struct PreparedTraining {
  std::shared_ptr<const data::Dataset> dataset;
  model::TemporalFusionTransformer model{nullptr};
  TrainOptions train;  // as the run uses them: a resumed run's own, with this run's epochs
  eval::BaselineMetrics baselines;  // on the validation split
  std::unique_ptr<Trainer> trainer;
};

// Checks the setup's options (UsageError naming the flag): cheap, so a program can call it
// before loading any data. prepare_training checks again.
void check_training_setup(const TrainingSetup& setup);

// Prepares the run: load or build the model, window the source's bars (from its feature
// store when it has one: under data parallelism rank 0 builds it while the others wait,
// then every rank maps the same file), the QAT preamble, baselines, the trainer (resumed
// with setup.resume).
PreparedTraining prepare_training(const data::BarSource& source, TrainingSetup setup, TrainingEvents& events);

// What a run saves: its configuration, features, windows, the best weights and the state
// that --resume continues from.
infer::ModelFile training_model_file(const PreparedTraining& run);

// The QAT preamble on a model: observers that have seen no data are calibrated on
// `recipe.calibration_batches` training batches; with freeze_observers they are then frozen.
void prepare_observers(model::TemporalFusionTransformer& model, const data::Dataset& dataset, const QatRecipe& recipe,
                       size_t batch_size, uint64_t seed, c10::Device device, TrainingEvents& events,
                       const std::function<bool()>& stop_requested = {});

// Post-training quantization of a QAT-converted model: calibrate on `batches` training
// batches, then freeze. PTQ in `qtft quantize` and in the accuracy comparison.
void post_training_quantize(model::TemporalFusionTransformer& model, const data::Dataset& dataset, int64_t batches,
                            size_t batch_size, uint64_t seed, c10::Device device);

}  // namespace qtft::train
