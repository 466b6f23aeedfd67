#pragma once

// `qtft report --load-model F` on bars: one model's forecasts over a split of the data as
// the same self-contained page a backtest gets (backtest_report.h), for a model trained
// elsewhere or deployed: the metrics and the desk's, coverage per quantile and IC per horizon
// step, fan charts against what happened, the importances and attention, and the training
// curve its file records.

#include <c10/core/Device.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qtft/artifact/model_loading.h"
#include "qtft/data/bars/backtest_forecasts.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/desk_metrics.h"
#include "qtft/eval/explanation.h"
#include "qtft/eval/metrics.h"
#include "qtft/infer/backtest_report.h"

namespace qtft::infer {

// What the page shows, from one pass over the split's windows.
struct ModelReport {
  std::string model;  // the file, as given
  std::string data;   // the bars, in words
  std::string split;  // train, validation, test or all
  eval::ForecastMetrics metrics;
  eval::DeskMetrics desk;
  std::vector<std::string> symbols;  // the desk's series names, by id
  eval::Explanation explanation;
  data::BacktestForecasts forecasts;                        // fold 0 throughout, in the target's units
  nlohmann::json training_curve = nlohmann::json::array();  // the file's per-epoch history
};

ModelReport score_model_for_report(artifact::LoadedModel& model, const std::string& model_file,
                                   const data::Dataset& dataset, data::Split split, const std::string& data,
                                   size_t batch_size, c10::Device device, double cost_bps);

// The page. Throws UsageError for a series asked for that has no forecasts.
std::string model_report_html(const ModelReport& report, const ReportOptions& options);

}  // namespace qtft::infer
