#pragma once

#include <string>
#include <string_view>

namespace qtft {

// What a CPU offers for bf16 matrix products, in the names lscpu prints: AVX512-BF16's dot
// products, AMX's bf16 tiles. Without either, LibTorch emulates bf16 and a bf16 step runs
// slower than an FP32 one (pytorch #118499).
struct CpuBf16Features {
  std::string cpu_name;  // "model name", or "this CPU" when the text has none
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool any() const { return avx512_bf16 || amx_bf16; }
};

// From /proc/cpuinfo's text: the first processor's "model name" and "flags" lines. Linux
// lists a feature there only when the kernel enables it (AMX's tile state included).
CpuBf16Features cpu_bf16_features_from(std::string_view cpuinfo);
// This machine's, read from /proc/cpuinfo once; none where it cannot be read.
const CpuBf16Features& this_cpu_bf16_features();

}  // namespace qtft
