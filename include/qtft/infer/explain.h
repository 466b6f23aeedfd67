#pragma once

#include <c10/core/Device.h>

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "qtft/data/features/dataset.h"
#include "qtft/eval/explanation.h"
#include "qtft/model/tft.h"

namespace qtft::infer {

// The TFT's interpretability outputs averaged over the windows of a split.
using eval::Explanation;
using eval::to_json;

Explanation explain_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                          size_t batch_size, c10::Device device);

// Each selector's inputs ranked by weight, the first `top` of each (all for 0), as text.
std::string format_explanation(const Explanation& explanation, size_t top = 0);

}  // namespace qtft::infer
