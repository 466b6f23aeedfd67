#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "qtft/dist/environment.h"

namespace qtft::dist {

enum class ReduceOp { sum, min, max };

// The collective operations data-parallel training needs, over one torch.distributed
// process group: Gloo, on CPU tensors. This is the one place that names c10d, so its
// headers (and gloo's, which the torch wheel lacks; Debian's libgloo-dev supplies them,
// headers only) stay out of the rest of the build. Every failure (a rendezvous that times
// out, a peer that died) becomes a qtft::Error naming this rank and the operation.
class Collective {
 public:
  // Joins the group described by `env`: rank 0 hosts the rendezvous store on
  // master_addr:master_port unless the launcher hosts it (torchrun), and every rank waits
  // at most `timeout` for the others, in the rendezvous and in every later operation.
  static Collective connect(const DistributedEnvironment& env, std::chrono::milliseconds timeout);

  int64_t rank() const;
  int64_t world_size() const;

  // In place, on every rank.
  void all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op);
  // Every rank ends with `root`'s values.
  void broadcast(std::vector<at::Tensor>& tensors, int64_t root);
  void barrier();

 private:
  struct Group;
  explicit Collective(std::shared_ptr<Group> group) : group_(std::move(group)) {}
  std::shared_ptr<Group> group_;
};

}  // namespace qtft::dist
