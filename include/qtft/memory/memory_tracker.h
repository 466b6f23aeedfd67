#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace qtft::memory {

// Bytes held by tensors on one device, as the allocator sees them.
struct MemoryStats {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;  // highest current_bytes since the last reset_peak
  // What the allocator holds from the system for them: on CUDA the caching allocator's
  // reserved segments (what --gpu-memory-limit caps); on the CPU the same as the above.
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};

// Installs the tracking CPU allocator (once per process, thread-safe; later calls do
// nothing). Only allocations made after this call are counted, so call it before building
// the model. Call it before any oneDNN work too: oneDNN frees its buffers through whichever
// CPU allocator is installed at the time of the free, so a oneDNN buffer allocated before
// the install and freed after it would reach the wrong deleter.
// Counted: every byte tensors ask the CPU allocator for (a float tensor of 1024 elements
// is 4096 bytes). Not counted: tensors over memory qtft did not allocate (from_blob) and
// scratch memory that BLAS or oneDNN take from malloc directly.
void install_cpu_memory_tracking();
bool cpu_memory_tracking_installed();

// Emulates a machine with less memory: an allocation through the tracking allocator that would
// take the bytes held past `bytes` throws c10::OutOfMemoryError, as CUDA's allocator does past
// its limit (memory::set_gpu_memory_limit), so that running out can be tried on any machine.
// 0 lifts it. Process-wide, like the allocator: for programs and tests, never the library.
void set_cpu_memory_limit(int64_t bytes);

// CPU: the tracking allocator's counters (throws qtft::Error if it is not installed).
// CUDA: the caching allocator's allocated-bytes statistics for that device (the current
// device when it has no index); throws qtft::Error when no such CUDA device exists.
// Any other device type throws qtft::Error naming it.
MemoryStats memory_stats(c10::Device device);
// Starts a new peak at the current figure.
void reset_peak(c10::Device device);
// CUDA: hands the caching allocator's unused blocks back to the device, so that what it
// reserves next (and its reserved peak) is the next computation's own. The CPU keeps no cache.
void release_cached_memory(c10::Device device);

}  // namespace qtft::memory
