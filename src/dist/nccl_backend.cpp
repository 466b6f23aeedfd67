#include "qtft/dist/detail/nccl_backend.h"

#include <torch/cuda.h>

#include <string>

#include "qtft/common/error.h"

// Only a build that found NCCL's and CUDA's headers compiles c10d's NCCL group
// (src/CMakeLists.txt defines both macros then); any other build refuses it clearly.
#if defined(QTFT_WITH_NCCL) && defined(USE_C10D_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace qtft::dist {

bool nccl_built() {
#if defined(QTFT_WITH_NCCL) && defined(USE_C10D_NCCL)
  return true;
#else
  return false;
#endif
}

c10::Device nccl_device(int64_t local_rank) {
  if (!nccl_built()) {
    throw UsageError(
        "--device cuda under data parallelism uses NCCL, and this qtft was built without it (the torch wheel "
        "has no CUDA, or NCCL's or the CUDA toolkit's headers were missing at configure time); train on the CPU "
        "(--device cpu, Gloo)");
  }
  const auto gpus = static_cast<int64_t>(torch::cuda::device_count());
  if (local_rank >= gpus) {
    throw UsageError("--device cuda under data parallelism uses NCCL, one GPU per rank: local rank " +
                     std::to_string(local_rank) + " needs GPU " + std::to_string(local_rank) + ", and this machine " +
                     (gpus == 0 ? std::string("has no CUDA GPU") : "has " + std::to_string(gpus)) +
                     "; train on the CPU (--device cpu, Gloo)");
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, c10::Device device) {
#if defined(QTFT_WITH_NCCL) && defined(USE_C10D_NCCL)
  // NCCL works on the current device: this rank's, before the communicator is made.
  c10::cuda::set_device(device.index());
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
#else
  (void)store, (void)rank, (void)size, (void)timeout;
  nccl_device(device.index());  // refuses, saying why
  throw UsageError("NCCL is not built");
#endif
}

}  // namespace qtft::dist
