#pragma once

#include <string>

namespace qtft {

// --precision: the type a model's matrix products run in. Bf16 multiplies in bfloat16
// through LibTorch's autocast for the inputs' device type (memory/autocast.h), with FP32
// weights, gradients and optimizer; what must stay FP32 (layer norms, softmax, the loss,
// observers, fake quantization) says so where it runs. A model file is FP32 either way.
// LibTorch-free, so that serving headers can name it.
enum class Precision { Fp32, Bf16 };
// "fp32" or "bf16"; anything else throws UsageError naming `flag` and the value.
Precision parse_precision(const std::string& name, const std::string& flag = "--precision");
const char* precision_name(Precision precision);

}  // namespace qtft
