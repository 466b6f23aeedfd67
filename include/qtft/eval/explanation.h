#pragma once

// What the TFT's interpretable parts say about a set of windows: the variable selectors'
// weights and the decoder's attention, averaged. Accumulated batch by batch from the
// forward's outputs, so that a pass that forecasts (a backtest's fold) explains as well.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "qtft/data/features/dataset.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

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

class ExplanationAccumulator {
 public:
  // The inputs are named by `spec`; encoder length and horizon come from `options`.
  ExplanationAccumulator(const data::InputSchema& spec, const data::DatasetOptions& options);
  void add(const model::TftOutput& out);
  Explanation result() const;

 private:
  std::vector<std::string> statics_, past_, future_;
  int64_t encoder_length_, horizon_;
  at::Tensor static_sum_, encoder_sum_, decoder_sum_, attention_sum_;
  int64_t windows_ = 0;
};

// The inputs of `rows` by weight, heaviest first (ties in input order), the first `top`
// (all for 0).
std::vector<std::pair<std::string, double>> ranked(const std::vector<std::pair<std::string, double>>& rows, size_t top);

// Each selector's inputs ranked by weight, the first `top` of each (all for 0); the JSON's
// "ranking" holds the same, its weight objects every input.
nlohmann::json to_json(const Explanation& explanation, size_t top = 0);

}  // namespace qtft::eval
