#include "qtft/dist/detail/data_parallel.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <torch/nn/module.h>

namespace qtft::dist {

void reduce_extremes(Collective& group, at::Tensor& min_max) {
  std::vector<at::Tensor> t{at::cat({-min_max.narrow(0, 0, 1), min_max.narrow(0, 1, 1)}).contiguous()};
  group.all_reduce(t, ReduceOp::max);
  min_max = at::cat({-t[0].narrow(0, 0, 1), t[0].narrow(0, 1, 1)});
}

StepExchange exchange_step(Collective& group, const at::Tensor& extremes, double loss, bool stop) {
  c10::NoGradGuard no_grad;
  const int64_t k = extremes.size(0);
  // Float to double and back is exact, so the extremes travel with the loss in one tensor.
  const at::Tensor tail = at::tensor({loss, stop ? 1.0 : 0.0}, at::kDouble).to(extremes.device());
  const at::Tensor row = at::cat({extremes.to(at::kDouble).reshape({-1}), tail});
  const at::Tensor rows = at::stack(group.all_gather(row));  // [ranks, 2k + 2]
  StepExchange out;
  const at::Tensor per_rank = rows.narrow(1, 0, 2 * k).view({group.world_size(), k, 2});
  out.extremes = at::stack({per_rank.select(2, 0).amin(0), per_rank.select(2, 1).amax(0)}, 1).to(at::kFloat);
  const at::Tensor tails = rows.narrow(1, 2 * k, 2).cpu();
  const auto t = tails.accessor<double, 2>();
  for (int64_t r = 0; r < tails.size(0); ++r) {
    out.mean_loss += t[r][0];
    out.stop = out.stop || t[r][1] != 0.0;
  }
  out.mean_loss /= static_cast<double>(group.world_size());
  return out;
}

void average_gradients(Collective& group, const std::vector<at::Tensor>& parameters, int64_t bucket_bytes) {
  c10::NoGradGuard no_grad;
  const double ranks = static_cast<double>(group.world_size());
  size_t first = 0;
  while (first < parameters.size()) {
    // One bucket: consecutive parameters of one dtype and device, up to bucket_bytes (at
    // least one parameter, however large).
    std::vector<at::Tensor> grads;
    int64_t bytes = 0;
    size_t end = first;
    while (end < parameters.size()) {
      const at::Tensor& p = parameters[end];
      const int64_t size = p.numel() * static_cast<int64_t>(p.element_size());
      if (!grads.empty() && (bytes + size > bucket_bytes || p.scalar_type() != parameters[first].scalar_type() ||
                             p.device() != parameters[first].device())) {
        break;
      }
      if (p.grad().defined()) grads.push_back(p.grad().reshape({-1}));
      bytes += size;
      ++end;
    }
    if (grads.empty()) {
      first = end;
      continue;
    }
    std::vector<at::Tensor> bucket{at::cat(grads)};
    group.all_reduce(bucket, ReduceOp::sum);
    bucket[0].div_(ranks);
    int64_t offset = 0;
    for (size_t i = first; i < end; ++i) {
      at::Tensor p = parameters[i];
      if (!p.grad().defined()) continue;
      p.mutable_grad().copy_(bucket[0].narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
    first = end;
  }
}

void broadcast_weights(Collective& group, torch::nn::Module& module) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors;
  for (const auto& p : module.parameters()) tensors.push_back(p);
  for (const auto& b : module.buffers()) tensors.push_back(b);
  // One tensor per call: Gloo's broadcast takes a list of replicas of one tensor, not many.
  // Received into a copy and copied in with ATen, so that the tensors' version counters
  // move (observers read their state through them).
  for (auto& t : tensors) {
    std::vector<at::Tensor> one{t.clone()};
    group.broadcast(one, 0);
    t.copy_(one[0]);
  }
}

bool all_ranks_agree(Collective& group, bool ok) {
  std::vector<at::Tensor> flag{at::scalar_tensor(ok ? 1 : 0, at::kInt).reshape({1})};
  group.all_reduce(flag, ReduceOp::min);
  return flag[0].item<int>() != 0;
}

std::function<bool()> stop_on_any_rank(std::shared_ptr<Collective> group, std::function<bool()> local) {
  if (!group) return local;
  return [group = std::move(group), local = std::move(local)] {
    std::vector<at::Tensor> flag{at::scalar_tensor(local && local() ? 1 : 0, at::kInt).reshape({1})};
    group->all_reduce(flag, ReduceOp::max);
    return flag[0].item<int>() != 0;
  };
}

}  // namespace qtft::dist
