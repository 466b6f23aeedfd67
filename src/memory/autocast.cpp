#include "qtft/memory/autocast.h"

#include <ATen/autocast_mode.h>

#include "qtft/common/error.h"

namespace qtft::memory {
namespace {
void apply(const AutocastState& s) {
  at::autocast::set_autocast_enabled(c10::DeviceType::CPU, s.cpu_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CPU, s.cpu_dtype);
  at::autocast::set_autocast_enabled(c10::DeviceType::CUDA, s.cuda_enabled);
  at::autocast::set_autocast_dtype(c10::DeviceType::CUDA, s.cuda_dtype);
  at::autocast::set_autocast_cache_enabled(s.cache_enabled);
}
}  // namespace

void require_precision_support(Precision precision, c10::Device device, const CpuBf16Features& cpu) {
  if (precision != Precision::Bf16 || !device.is_cpu() || cpu.any()) return;
  throw UsageError("--precision bf16: " + cpu.cpu_name +
                   " has neither avx512_bf16 nor amx_bf16 (lscpu's flags), so LibTorch would emulate bf16 and run "
                   "slower than fp32; use --precision fp32 here");
}

at::Tensor full_precision(const at::Tensor& x) {
  return at::isReducedFloatingType(x.scalar_type()) ? x.to(at::kFloat) : x;
}

AutocastState AutocastState::current() {
  AutocastState s;
  s.cpu_enabled = at::autocast::is_autocast_enabled(c10::DeviceType::CPU);
  s.cpu_dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CPU);
  s.cuda_enabled = at::autocast::is_autocast_enabled(c10::DeviceType::CUDA);
  s.cuda_dtype = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  s.cache_enabled = at::autocast::is_autocast_cache_enabled();
  return s;
}

AutocastState AutocastState::with_precision(Precision precision, c10::DeviceType device_type,
                                            const AutocastState& base) {
  AutocastState s = base;
  if (precision != Precision::Bf16) return s;
  if (device_type == c10::DeviceType::CUDA) {
    s.cuda_enabled = true;
    s.cuda_dtype = c10::kBFloat16;
  } else {
    s.cpu_enabled = true;
    s.cpu_dtype = c10::kBFloat16;
  }
  s.cache_enabled = false;
  return s;
}

AutocastScope::AutocastScope(const AutocastState& state) : previous_(AutocastState::current()) { apply(state); }

AutocastScope::~AutocastScope() { apply(previous_); }

}  // namespace qtft::memory
