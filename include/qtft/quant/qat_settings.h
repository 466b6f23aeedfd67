#pragma once

#include <cstdint>

#include "qtft/quant/activation_observer.h"

namespace qtft::quant {

// What a layer needs to know to train quantization-aware: the weight and activation bit
// widths and the observers' moving-average constant.
struct QatSettings {
  int64_t weight_bits = 8;
  int64_t activation_bits = 8;
  double averaging_constant = 0.01;

  // Options of the activation observers these settings describe.
  ActivationFakeQuantOptions observer_options() const {
    return ActivationFakeQuantOptions().bits(activation_bits).averaging_constant(averaging_constant);
  }
};

}  // namespace qtft::quant
