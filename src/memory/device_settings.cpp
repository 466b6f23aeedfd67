#include "qtft/memory/device_settings.h"

#include <ATen/Context.h>
#include <c10/core/CachingDeviceAllocator.h>

#include <cmath>
#include <cstdlib>

#include "qtft/common/error.h"
#include "qtft/common/format.h"

// Built with CUDA's headers when the wheels ship them (src/CMakeLists.txt): the caching
// allocator's memory fraction and the device's name are in CUDA-only headers.
#ifdef QTFT_WITH_CUDA_HEADERS
#include <ATen/cuda/CUDAContextLight.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace qtft::memory {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// The device's index, checked against the GPUs there are; UsageError naming `flag` otherwise.
c10::DeviceIndex cuda_device_index(c10::Device device, const std::string& flag) {
  if (!device.is_cuda()) {
    throw UsageError(flag + " limits a CUDA GPU's memory, and this run is on " + device.str() +
                     " (give --device cuda, or drop " + flag + ")");
  }
  if (!at::globalContext().hasCUDA()) throw UsageError(flag + ": no CUDA GPU on this machine");
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
  const auto count = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->deviceCount();
  if (index >= count) {
    throw UsageError(flag + ": " + device.str() + " does not exist (" + std::to_string(count) + " CUDA device(s))");
  }
  return index;
}

int64_t total_bytes(c10::DeviceIndex index) {
  // The allocator serves a device once CUDA is initialized, which nothing may have done yet.
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  return static_cast<int64_t>(c10::getDeviceAllocator(c10::DeviceType::CUDA)->getMemoryInfo(index).second);
}

}  // namespace

void use_deterministic_algorithms() {
  // Before cuBLAS makes its first handle, which reads it; a value the user set stays.
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  auto& context = at::globalContext();
  context.setDeterministicAlgorithms(true, /*warn_only=*/false);
  context.setDeterministicFillUninitializedMemory(false);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
  // cuDNN's LSTM would otherwise multiply in TF32 on Ampere and later GPUs: the same bits
  // again, but not float32's, and QAT's rounding follows them.
  context.setAllowTF32CuDNN(false);
}

bool deterministic_algorithms_in_use() { return at::globalContext().deterministicAlgorithms(); }

void set_gpu_memory_limit(c10::Device device, int64_t bytes) {
  const std::string flag = "--gpu-memory-limit";
  if (bytes < kMiB) throw UsageError(flag + " must be at least 1MiB, got " + std::to_string(bytes) + " bytes");
  const c10::DeviceIndex index = cuda_device_index(device, flag);
  const int64_t total = total_bytes(index);
  if (bytes > total) {
    throw UsageError(flag + " " + format_bytes(static_cast<uint64_t>(bytes)) + " is more than " + device.str() +
                     " has (" + format_bytes(static_cast<uint64_t>(total)) + ")");
  }
#ifdef QTFT_WITH_CUDA_HEADERS
  c10::cuda::CUDACachingAllocator::setMemoryFraction(static_cast<double>(bytes) / static_cast<double>(total), index);
#else
  throw UsageError(flag +
                   ": this qtft was built without CUDA's headers (the torch wheel's nvidia packages), which "
                   "the allocator's limit needs");
#endif
}

int64_t gpu_memory_limit(c10::Device device) {
#ifdef QTFT_WITH_CUDA_HEADERS
  if (!device.is_cuda() || !at::globalContext().hasCUDA()) return 0;
  const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
  const int64_t total = total_bytes(index);  // initializes CUDA first
  const double fraction = c10::cuda::CUDACachingAllocator::getMemoryFraction(index);
  if (!(fraction < 1.0)) return 0;
  // The allocator keeps the fraction, not the bytes: rounded back to the bytes that were set.
  return static_cast<int64_t>(std::llround(fraction * static_cast<double>(total)));
#else
  (void)device;
  return 0;
#endif
}

std::string describe_device(c10::Device device) {
  if (!device.is_cuda() || !at::globalContext().hasCUDA()) return device.str();
  const c10::DeviceIndex index = device.has_index() ? device.index() : 0;
  const int64_t total = total_bytes(index);  // initializes CUDA first
  std::string text = device.str() + " (";
#ifdef QTFT_WITH_CUDA_HEADERS
  text += std::string(at::cuda::getDeviceProperties(index)->name) + ", ";
#endif
  text += format_bytes(static_cast<uint64_t>(total));
  if (const int64_t limit = gpu_memory_limit(device); limit > 0) {
    text += ", limited to " + format_bytes(static_cast<uint64_t>(limit));
  }
  return text + ")";
}

}  // namespace qtft::memory
