#pragma once

#include <string>

namespace qtft::artifact {

// How a model loaded from an int8 file multiplies: `integer` runs every product it can in
// integers (TemporalFusionTransformer::use_integer_products), on the CPU; `dequantized`
// multiplies the integers times their scales in float, bitwise what the QAT model it was
// exported from computes. Other model files ignore it. LibTorch-free, for serving headers.
enum class Int8Kernels { integer, dequantized };
// Parses "integer" or "dequantized"; anything else throws UsageError naming `flag`.
Int8Kernels parse_int8_kernels(const std::string& name, const std::string& flag);
const char* int8_kernels_name(Int8Kernels kernels);

}  // namespace qtft::artifact
