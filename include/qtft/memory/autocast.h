#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "qtft/common/cpu_features.h"
#include "qtft/common/precision.h"

// What --precision bf16 (qtft/common/precision.h) does to a forward: LibTorch's autocast
// around it, and FP32 where it must stay FP32.

namespace qtft::memory {

// Throws UsageError when `precision` would not pay on `device`: bf16 on a CPU with neither
// avx512_bf16 nor amx_bf16 (LibTorch would emulate it, slower than FP32). `cpu` is this
// machine's unless a test names another.
void require_precision_support(Precision precision, c10::Device device,
                               const CpuBf16Features& cpu = this_cpu_bf16_features());

// x in FP32 when it is a reduced type (bf16, half), else x itself: for what stays FP32 under
// --precision bf16 (layer norms, softmax, observers, the outputs) and keeps a double model's type.
at::Tensor full_precision(const at::Tensor& x);

// This thread's autocast settings for the CPU and CUDA, as a checkpoint captures them in its
// forward and puts them back for its recompute.
struct AutocastState {
  bool cpu_enabled = false;
  bool cuda_enabled = false;
  c10::ScalarType cpu_dtype = c10::kBFloat16;
  c10::ScalarType cuda_dtype = c10::kBFloat16;
  bool cache_enabled = true;

  static AutocastState current();
  // Bf16 products on `device_type` (CPU or CUDA), nothing else changed from `base`; the
  // cast cache off (see AutocastScope).
  static AutocastState with_precision(Precision precision, c10::DeviceType device_type,
                                      const AutocastState& base = current());
  bool operator==(const AutocastState&) const = default;
};

// Puts `state` in force on this thread for the scope's life, then the settings before it.
// Scopes that qtft opens keep autocast's cache of cast weights off: a cached cast is shared
// by every use of a weight in the autocast region, and a checkpointed segment's recompute,
// which runs in a region of its own, would then build another graph than the plain forward
// (other gradient sums, other bits). Each use casts for itself instead.
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& state);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  AutocastState previous_;
};

}  // namespace qtft::memory
