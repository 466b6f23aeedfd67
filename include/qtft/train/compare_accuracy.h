#pragma once

#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "qtft/data/features/dataset.h"
#include "qtft/eval/desk_metrics.h"
#include "qtft/eval/int8_agreement.h"
#include "qtft/eval/metrics.h"
#include "qtft/model/tft_options.h"
#include "qtft/train/progress.h"
#include "qtft/train/train_options.h"
#include "qtft/train/workflow.h"

namespace qtft::train {

struct CompareOptions {
  model::TftOptions model;    // the FP32 architecture; QAT variants add the recipe's bit widths
  train::TrainOptions train;  // every model's budget is train.epochs
  // Bit widths, calibration, and where the QAT rows start: from FP32 (its first
  // epochs, then fine-tuning: train::plan_two_phase) or from scratch.
  train::QatRecipe qat;
  c10::Device device = c10::Device(c10::kCPU);
};

struct ComparedModel {
  std::string name;    // fp32, ptq, qat_frozen, int8, qat_live, qat_step
  std::string recipe;  // how it was made, in a few words
  eval::ForecastMetrics val;
  double degradation_pct = 0.0;  // validation loss against FP32's, in percent
  // int8 only: how it follows the fake-quantized model it was exported from (qat_frozen).
  std::optional<eval::Int8Agreement> int8 = std::nullopt;
  eval::DeskMetrics desk;  // the same validation forecasts as a desk reads them (no trading cost)
};

// On one data split and seed, every model with the same budget of train.epochs: trains FP32;
// derives PTQ from it (calibrate, freeze); trains QAT with the two-phase recipe (observers
// live for the recipe's live epochs, then frozen), exports that model to an int8 file and
// runs it with integer products (int8), and trains QAT with live observers throughout, once
// updated in every forward (qat_live) and once at every step's end (qat_step). From
// FP32 (the default), both QAT models take over the FP32 run where its first epochs end
// (the same run FP32 finishes) and fine-tune for the rest; from scratch they train all
// epochs with fake quantization. Every model is judged by its best epoch (of the QAT
// phase, for QAT) on the validation split. `log` receives a line as each stage starts;
// `stop_requested` is polled after every training step and ends the comparison with an error.
std::vector<ComparedModel> compare_accuracy(const std::shared_ptr<const data::Dataset>& dataset,
                                            const CompareOptions& options, train::ProgressReporter& progress,
                                            const std::function<void(const std::string&)>& log,
                                            const std::function<bool()>& stop_requested = {});

std::string format_comparison(const std::vector<ComparedModel>& rows);
// Per model its figures; the desk's per-series ICs keyed by series_names[id] when given.
nlohmann::json to_json(const std::vector<ComparedModel>& rows, const std::vector<std::string>& series_names = {});

}  // namespace qtft::train
