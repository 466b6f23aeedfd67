#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "qtft/quant/quant_params.h"

namespace qtft::quant {

// A weight as an int8 export stores it: integers [rows, cols] (int8, zero point 0) and one
// float scale per row (output channel).
struct QuantizedWeight {
  at::Tensor values;  // int8 [rows, cols]
  at::Tensor scales;  // float [rows]
};

// y = x W^T + b computed in integers: x quantized per tensor with the parameters of the
// observer that produced it (unsigned codes 0..input_qmax), W's int8 codes per output
// channel, products summed in int32, then scaled back to float and the bias added. This is
// the one place that knows the kernel library: today fbgemm, through ATen's quantized CPU
// operators (deprecated upstream, pytorch#184982), so that replacing it touches this file
// only. Files keep plain integers and scales; the backend's packed form lives in memory.
//
// Exact: when every input is one of the observer's codes (the values its fake quantization
// gives), the integer sums are exact and the result differs from the fake-quantized float
// product only by float rounding. One caveat is the kernel's: on x86 CPUs without VNNI,
// fbgemm adds u8 x s8 products two at a time (columns 2j and 2j+1) in int16, which
// saturates. saturation_free() checks a weight against that bound for every possible input;
// the model keeps a float product wherever it does not hold (with 8-bit activations and
// 8-bit weights that is almost everywhere; at 7-bit activations or 4-bit weights, nowhere).
class Int8Linear {
 public:
  // Throws qtft::Error when the backend is unavailable (see unavailable_reason) or the
  // tensors do not fit together. bias may be undefined.
  Int8Linear(const QuantizedWeight& weight, const at::Tensor& bias, QParams input, int64_t input_qmax);

  // x: float [..., cols], on the CPU; returns float [..., rows].
  at::Tensor forward(const at::Tensor& x) const;

  // True when no pair of adjacent columns can leave int16 for any input code in
  // 0..input_qmax: input_qmax * (positive part of w[r, 2j] + w[r, 2j+1]) <= 32767, and the
  // same for the negative parts against 32768, for every row r.
  static bool saturation_free(const at::Tensor& values, int64_t input_qmax);
  // Empty when integer products can run in this process; otherwise why not (the active
  // quantized engine is not fbgemm's, for one).
  static std::string unavailable_reason();

 private:
  struct Packed;
  std::shared_ptr<const Packed> packed_;
  QParams input_;
  int64_t rows_;
  int64_t cols_;
};

}  // namespace qtft::quant
