#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "qtft/artifact/model_loading.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/metrics.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

// How closely an int8 model (an int8 file, loaded with its integer products) follows the
// fake-quantized model it was exported from, window by window on one split.
struct Int8Agreement {
  ForecastMetrics int8;
  ForecastMetrics fake_quant;
  double loss_difference_pct = 0.0;  // int8's loss against fake quant's, in percent
  // |median forecast of int8 - median forecast of fake quant| over every window and
  // horizon step, in steps of the output layer's quantization (its observer's scale).
  int64_t forecasts = 0;
  double identical_fraction = 0.0;  // of forecasts that agree bitwise
  double median_steps = 0.0;
  double p99_steps = 0.0;
  double max_steps = 0.0;
  int64_t integer_products = 0;  // Dense layers running in integers
  int64_t dense_layers = 0;
};

// Both models run in eval mode without gradient over every window of `split`, in order.
Int8Agreement compare_int8_to_fake_quant(model::TemporalFusionTransformer& fake_quant, artifact::LoadedModel& int8,
                                         const data::Dataset& dataset, data::Split split, size_t batch_size,
                                         c10::Device device);

// Two lines for a report: the loss difference and the distribution of the differences.
std::string format_int8_agreement(const Int8Agreement& agreement);
nlohmann::json to_json(const Int8Agreement& agreement);

}  // namespace qtft::eval
