#include "qtft/memory/memory_tracker.h"

#include <ATen/Context.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "qtft/common/error.h"

namespace qtft::memory {
namespace {

// Every block carries its size in a header in front of the data, so that the deleter needs
// nothing but the data pointer: ATen frees some blocks through raw_deleter(), which gets
// only that pointer. 64 bytes keeps the data at alloc_cpu's 64-byte alignment.
constexpr size_t kHeaderBytes = 64;

std::atomic<int64_t> g_current{0};
std::atomic<int64_t> g_peak{0};
std::atomic<bool> g_installed{false};
std::atomic<int64_t> g_limit{0};  // 0: none

void count_allocation(int64_t bytes) {
  const int64_t now = g_current.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void tracked_delete(void* data) {
  // Zero-byte blocks have no storage (as with c10's default allocator).
  if (data == nullptr) return;
  char* base = static_cast<char*>(data) - kHeaderBytes;
  size_t bytes = 0;
  std::memcpy(&bytes, base, sizeof(bytes));
  g_current.fetch_sub(static_cast<int64_t>(bytes), std::memory_order_relaxed);
  c10::profiledCPUMemoryReporter().Delete(data);
  c10::free_cpu(base);
}

// Counts the bytes tensors ask for (not the header, which is our own overhead), so that a
// float tensor of 1024 elements counts as 4096 bytes, as on CUDA.
class TrackingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return {nullptr, nullptr, &tracked_delete, cpu};
    if (const int64_t limit = g_limit.load(std::memory_order_relaxed); limit > 0) {
      const int64_t held = g_current.load(std::memory_order_relaxed);
      TORCH_CHECK_WITH(OutOfMemoryError, held + static_cast<int64_t>(n) <= limit,
                       "CPU out of memory. Tried to allocate ", n, " bytes with ", held, " held under a limit of ",
                       limit, " bytes (qtft::memory::set_cpu_memory_limit). ");
    }
    char* base = static_cast<char*>(c10::alloc_cpu(n + kHeaderBytes));  // throws on OOM
    std::memcpy(base, &n, sizeof(n));
    void* data = base + kHeaderBytes;
    count_allocation(static_cast<int64_t>(n));
    // Keeps torch.profiler's memory view working, as the default allocator does.
    c10::profiledCPUMemoryReporter().New(data, n);
    return {data, data, &tracked_delete, cpu};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &tracked_delete; }

  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }
};

std::string device_text(c10::Device device) { return device.str(); }

c10::DeviceIndex cuda_index(c10::Device device, const char* what) {
  // hasCUDA is false both for a CPU-only wheel and for a machine without a GPU; either way
  // nothing below may touch CUDA.
  if (!at::globalContext().hasCUDA()) {
    throw Error(std::string(what) + ": " + device_text(device) + " requested, but no CUDA device is available");
  }
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  const auto* guard = c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA);
  const c10::DeviceIndex index = device.has_index() ? device.index() : guard->getDevice().index();
  if (index < 0 || index >= guard->deviceCount()) {
    throw Error(std::string(what) + ": " + device_text(device) + " does not exist (this machine has " +
                std::to_string(guard->deviceCount()) + " CUDA device(s))");
  }
  return index;
}

// The CUDA caching allocator is reached through c10's registry of device allocators (the
// same path torch.accelerator.memory_stats takes) rather than c10/cuda's header: that keeps
// this file free of a link dependency on libc10_cuda, so it builds against CPU-only wheels.
c10::DeviceAllocator* cuda_allocator(const char* what, c10::Device device) {
  try {
    return c10::getDeviceAllocator(c10::DeviceType::CUDA);
  } catch (const c10::Error& e) {
    throw Error(std::string(what) + ": no CUDA allocator for " + device_text(device) + ": " +
                e.what_without_backtrace());
  }
}

[[noreturn]] void throw_unsupported(c10::Device device, const char* what) {
  throw Error(std::string(what) + ": no memory accounting for device " + device_text(device) +
              " (only cpu and cuda are supported)");
}

}  // namespace

void install_cpu_memory_tracking() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Static lifetime and never uninstalled: tensors it allocated may outlive anything, and
    // their deleter is a plain function that needs no allocator object.
    static TrackingCpuAllocator allocator;
    // Priority 0 is c10's default; a higher one replaces it.
    constexpr uint8_t kPriority = 1;
    c10::SetCPUAllocator(&allocator, kPriority);
    if (c10::GetCPUAllocator() != &allocator) {
      throw Error("install_cpu_memory_tracking: another CPU allocator with a higher priority is installed");
    }
    g_installed.store(true, std::memory_order_release);
  });
}

void set_cpu_memory_limit(int64_t bytes) {
  if (bytes < 0) throw Error("set_cpu_memory_limit: a negative limit (" + std::to_string(bytes) + " bytes)");
  g_limit.store(bytes, std::memory_order_relaxed);
}

bool cpu_memory_tracking_installed() { return g_installed.load(std::memory_order_acquire); }

MemoryStats memory_stats(c10::Device device) {
  if (device.is_cpu()) {
    if (!cpu_memory_tracking_installed()) {
      throw Error("memory_stats: CPU memory tracking is not installed; call install_cpu_memory_tracking() first");
    }
    const int64_t current = g_current.load(std::memory_order_relaxed), peak = g_peak.load(std::memory_order_relaxed);
    return {current, peak, current, peak};
  }
  if (device.is_cuda()) {
    const c10::DeviceIndex index = cuda_index(device, "memory_stats");
    const auto stats = cuda_allocator("memory_stats", device)->getDeviceStats(index);
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    const auto& allocated = stats.allocated_bytes[aggregate];
    const auto& reserved = stats.reserved_bytes[aggregate];
    return {allocated.current, allocated.peak, reserved.current, reserved.peak};
  }
  throw_unsupported(device, "memory_stats");
}

void release_cached_memory(c10::Device device) {
  if (!device.is_cuda()) return;
  cuda_index(device, "release_cached_memory");
  cuda_allocator("release_cached_memory", device)->emptyCache();
}

void reset_peak(c10::Device device) {
  if (device.is_cpu()) {
    if (!cpu_memory_tracking_installed()) {
      throw Error("reset_peak: CPU memory tracking is not installed; call install_cpu_memory_tracking() first");
    }
    g_peak.store(g_current.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return;
  }
  if (device.is_cuda()) {
    const c10::DeviceIndex index = cuda_index(device, "reset_peak");
    cuda_allocator("reset_peak", device)->resetPeakStats(index);
    return;
  }
  throw_unsupported(device, "reset_peak");
}

}  // namespace qtft::memory
