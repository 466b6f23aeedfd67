#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

namespace qtft::memory {

// Settings of the process that a program chooses for its runs on a device. Each is
// process-wide, so the library never makes them by itself: qtft's flags call them
// (--deterministic, --gpu-memory-limit), an embedding program decides for itself.

// Deterministic algorithms for the bitwise promises on a GPU: LibTorch's deterministic mode
// (an operator without a deterministic CUDA kernel throws, naming itself, instead of
// summing in a varying order), cuDNN's deterministic algorithms without autotuning, and a
// fixed cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG=:4096:8 unless the environment sets one;
// cuDNN's LSTM in float32, not TF32;
// cuBLAS reads it when its first handle is made, so call this before any CUDA work). On the
// CPU qtft's kernels are deterministic already and nothing changes. Uninitialized memory is
// not filled: qtft never reads it, and the fill would cost every allocation.
void use_deterministic_algorithms();
bool deterministic_algorithms_in_use();

// Caps what LibTorch's CUDA caching allocator reserves on `device` at `bytes` (its per-process
// memory fraction), so that a large GPU runs out where a smaller card would: a step that
// needs more fails with CUDA's out-of-memory error. The CUDA context's own memory (several
// hundred MiB, outside the allocator) is not counted. Throws UsageError naming
// --gpu-memory-limit for a device that is not a CUDA GPU, a CUDA-less build, a limit below 1
// MiB or above the card's memory.
void set_gpu_memory_limit(c10::Device device, int64_t bytes);
// The limit set on `device`, 0 for none.
int64_t gpu_memory_limit(c10::Device device);

// The device for the line that says where a run goes: "cpu", or "cuda:0 (NVIDIA H100 80GB
// HBM3, 79.2 GiB)" with ", limited to 4 GiB" under a limit.
std::string describe_device(c10::Device device);

}  // namespace qtft::memory
