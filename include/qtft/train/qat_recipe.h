#pragma once

// Quantization-aware training as a recipe: bit widths, calibration, when observers freeze,
// and the two-phase run that starts from FP32. Plain options, no LibTorch.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>

#include "qtft/train/train_options.h"

namespace qtft::train {

// Where a --two-phase QAT run starts.
enum class QatStart {
  Fp32,     // a trained FP32 model: trained first in the same run, or --load-model (the default)
  Scratch,  // a fresh QAT model, calibrated on an untrained network
};
QatStart parse_qat_start(const std::string& name);  // fp32 | scratch

// Quantization-aware training as users of the earlier tool ask for it.
struct QatRecipe {
  bool use_qat = false;
  int64_t weight_bits = 8;
  int64_t activation_bits = 8;
  int64_t calibration_batches = 100;  // fresh observers see this many batches before training
  bool freeze_observers = false;      // frozen from the first step
  bool two_phase = false;             // the recipe below in one run
  QatStart start = QatStart::Fp32;
  // From FP32: the epochs of --epochs that fine-tune with fake quantization. 0: a quarter,
  // at least 1 and at least live_epochs + 1.
  int64_t qat_epochs = 0;
  // Epochs with live observers before they freeze, a fraction counting steps. From FP32,
  // counted in the fine-tuning (-1: half of it; 0 freezes right after calibrating); from
  // scratch, -1 means 1.
  double live_epochs = -1;
  // From FP32: the fine-tuning's learning rate over --learning-rate. 1 (the run's own rate)
  // measured best on the embedded data; 0.1 left QAT 5% behind (docs/QAT_GUIDE.md).
  double fine_tune_lr_scale = 1.0;

  // From scratch only: two-phase turns QAT on and freezes the observers after live_epochs,
  // which must leave at least one frozen epoch of train.epochs. Throws UsageError naming
  // the flags.
  void apply_to(TrainOptions& train);
};

// A --two-phase run that starts from FP32: FP32 epochs, then the best FP32 weights with
// fake quantization, the observers calibrated on that trained network, fine-tuned at the
// plan's learning rate with live observers for live_epochs, then frozen. The epochs are numbered on
// through both phases, so the fine-tuning sees the batches the run would have seen next.
struct TwoPhasePlan {
  int64_t fp32_epochs = 0;     // trained first; 0 when the FP32 phase is a loaded model
  int64_t qat_epochs = 0;      // fine-tuning with fake quantization
  double live_epochs = 0;      // of qat_epochs, before the observers freeze; >= qat_epochs: never
  double learning_rate = 0.0;  // the fine-tuning's
  int64_t weight_bits = 8;
  int64_t activation_bits = 8;
  int64_t calibration_batches = 100;

  // The fine-tuning's options: `train` with the plan's rate and freezing epoch.
  TrainOptions fine_tuning(const TrainOptions& train) const;
  std::string describe() const;  // one line: the split of the epochs and how the QAT phase runs
};
nlohmann::json to_json(const TwoPhasePlan& plan);
TwoPhasePlan two_phase_plan_from_json(const nlohmann::json& json);

// The plan of a --two-phase run from FP32 (nullopt for any other run). `fp32_loaded`: the
// run fine-tunes a loaded FP32 model, which is the FP32 phase, so every epoch is QAT.
// Throws UsageError naming the flags when the epochs do not split.
std::optional<TwoPhasePlan> plan_two_phase(const QatRecipe& recipe, const TrainOptions& train, bool fp32_loaded);

}  // namespace qtft::train
