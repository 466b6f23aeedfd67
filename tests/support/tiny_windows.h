#pragma once

#include "qtft/data/features/dataset.h"

namespace qtft::test {

// Windows of two encoder bars and one decoder bar, with a fifth of each series for
// validation and a fifth for test: what a hand-written file of a few dozen bars affords.
inline data::DatasetOptions tiny_windows() {
  data::DatasetOptions o;
  o.encoder_length = 2;
  o.horizon = 1;
  o.validation_fraction = 0.2;
  o.test_fraction = 0.2;
  return o;
}

}  // namespace qtft::test
