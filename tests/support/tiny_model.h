#pragma once

#include <memory>

#include "qtft/data/features/dataset.h"
#include "qtft/model/tft.h"
#include "qtft/train/train_options.h"

namespace qtft::test {

// A small dataset (2 symbols of 301 bars, encoder 12, horizon 3) and a tiny TFT for it:
// big enough to exercise every part of training, small enough to run in a second.
data::Dataset tiny_dataset();
// The same bars with an input of every declared kind: observed real 'flow', observed
// categorical 'phase' (3 levels), known categorical 'session' (2), static real 'tick' and
// static categorical 'sector', one level per symbol.
data::Dataset tiny_declared_dataset();
model::TftOptions tiny_model_options(const data::Dataset& dataset);
train::TrainOptions tiny_train_options();
// A copy that a Trainer can share.
inline std::shared_ptr<const data::Dataset> shared(const data::Dataset& dataset) {
  return std::make_shared<const data::Dataset>(dataset);
}

}  // namespace qtft::test
