#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace qtft::quant {

// Per-channel symmetric fake quantization of a weight onto weight_range(bits) (8: -127..127,
// 4: -7..7), one scale per index along axis (0: per output row of a Linear weight).
//
// Scales come from the weight as it is now, max |w_c| / qmax (symmetric_per_channel_scales),
// with no running state: the weights move every step, and an int8 export quantizes the final
// ones. They are computed without gradient; the gradient reaches w straight through, masked
// to 0 only where a value was clamped (which symmetric scales never do, so it is all ones).
// Throws UsageError for bits other than 4 and 8.
at::Tensor fake_quantize_weight(const at::Tensor& w, int64_t bits, int64_t axis = 0);

}  // namespace qtft::quant
