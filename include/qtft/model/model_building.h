#pragma once

#include <torch/nn/module.h>

#include <cstdint>

#include "qtft/data/features/dataset.h"
#include "qtft/model/tft.h"

namespace qtft::model {

// Options that fit the dataset (its inputs, symbols, encoder length and horizon), with the
// architecture at its defaults for the caller to set.
TftOptions model_options_for(const data::Dataset& dataset);
// The options of a fresh model: the sizes from the dataset, the user's architecture, and
// QAT at these bit widths when `use_qat`; validated (throws naming the flag at fault).
TftOptions model_options_for(const data::Dataset& dataset, const Architecture& architecture, bool use_qat,
                             int64_t weight_bits, int64_t activation_bits);

// Builds a model with weights initialized from `seed`, so the same seed gives the same
// starting point on every run. The initialization draws from a stream of its own
// (memory::RandomStream): the process's generators are left as they were.
TemporalFusionTransformer build_model(const TftOptions& options, uint64_t seed);

int64_t count_parameters(const torch::nn::Module& module);

}  // namespace qtft::model
