#pragma once

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>

namespace qtft::dist {

// Whether this build can make NCCL groups: the torch wheel has CUDA, and NCCL's and CUDA's
// headers were found when it was configured.
bool nccl_built();

// The GPU an NCCL rank uses, cuda:local_rank. Throws qtft::UsageError when this build has no
// NCCL or this machine has no GPU for the rank, saying which.
c10::Device nccl_device(int64_t local_rank);

// c10d's ProcessGroupNCCL on `device` (what nccl_device gave), over `store`.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, c10::Device device);

}  // namespace qtft::dist
