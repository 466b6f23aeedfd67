#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "qtft/dist/environment.h"

namespace qtft::dist {

enum class ReduceOp { sum, min, max };

// The transport under the group: Gloo on CPU tensors, NCCL on each rank's GPU
// (cuda:LOCAL_RANK; `--device cuda`). Every operation takes tensors of any device and
// hands them back where they were: a CPU flag under NCCL goes to the GPU and back.
enum class Backend { gloo, nccl };

// The collective operations data-parallel training needs, over one torch.distributed
// process group. This is the one place that names c10d, so its headers (and gloo's, which
// the torch wheel lacks; Debian's libgloo-dev supplies them, headers only; and NCCL's and
// CUDA's) stay out of the rest of the build. Every failure (a rendezvous that times out, a
// peer that died) becomes a qtft::Error naming this rank and the operation.
class Collective {
 public:
  // Joins the group described by `env`: rank 0 hosts the rendezvous store on
  // master_addr:master_port unless the launcher hosts it (torchrun), and every rank waits
  // at most `timeout` for the others, in the rendezvous and in every later operation.
  // NCCL without a GPU for this rank, or in a build without NCCL, is refused before the
  // rendezvous (qtft::UsageError saying which).
  static Collective connect(const DistributedEnvironment& env, std::chrono::milliseconds timeout,
                            Backend backend = Backend::gloo);

  int64_t rank() const;
  int64_t world_size() const;
  Backend backend() const;
  // Where the backend's tensors live: the CPU for Gloo, this rank's GPU for NCCL.
  c10::Device device() const;
  // How many operations this process has run on the group so far (the benchmarks count
  // the collectives of a training step with it).
  int64_t operations() const;

  // In place, on every rank.
  void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op);
  // Every rank ends with `root`'s values.
  void broadcast(std::vector<at::Tensor>& tensors, int64_t root);
  // Every rank's `tensor` (same shape and dtype everywhere), in rank order.
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
  void barrier();

 private:
  struct Group;
  explicit Collective(std::shared_ptr<Group> group) : group_(std::move(group)) {}
  std::shared_ptr<Group> group_;
};

}  // namespace qtft::dist
