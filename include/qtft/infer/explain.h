#pragma once

#include <c10/core/Device.h>

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "qtft/data/dataset.h"
#include "qtft/model/tft.h"

namespace qtft::infer {

// The TFT's interpretability outputs averaged over the windows of a split.
struct Explanation {
  std::vector<std::pair<std::string, double>> static_weights;   // per static input: the symbol, then the declared
  std::vector<std::pair<std::string, double>> encoder_weights;  // per past input
  std::vector<std::pair<std::string, double>> decoder_weights;  // per future input
  // Mean attention of the decoder queries to each position: index 0 is the oldest encoder
  // bar (position -L), index L-1 the last encoder bar (-1), then decoder steps 1..H.
  std::vector<double> attention_profile;
  int64_t encoder_length = 0;
  int64_t windows = 0;
};

Explanation explain_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                          size_t batch_size, c10::Device device);

// Each selector's inputs ranked by weight, the first `top` of each (all for 0); the JSON's
// "ranking" holds the same, its weight objects every input.
std::string format_explanation(const Explanation& explanation, size_t top = 0);
nlohmann::json to_json(const Explanation& explanation, size_t top = 0);

}  // namespace qtft::infer
