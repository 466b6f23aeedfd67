#include "qtft/train/fused_adam.h"

#include <ATen/ops/_fused_adam.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

namespace qtft::train {

at::Tensor FusedAdam::step(LossClosure closure) {
  for (const auto& group : param_groups()) {
    if (static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad())
      return torch::optim::Adam::step(closure);
  }
  c10::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
    // One step tensor per distinct count (normally one for all): the kernel reads it, as
    // PyTorch's fused path does, after the count was advanced.
    struct StepTensor {
      c10::Device device;
      int64_t count;
      at::Tensor value;
    };
    std::vector<StepTensor> step_tensors;
    // Everything this step allocates (a new parameter's moments, the step tensors) comes
    // first, and the state changes only once it all exists: a step that runs out of memory
    // leaves the optimizer as it was, so that a run resumed from its checkpoint is exact.
    std::vector<std::pair<c10::TensorImpl*, std::unique_ptr<torch::optim::AdamParamState>>> fresh_states;
    std::vector<torch::optim::AdamParamState*> stepped;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      torch::optim::AdamParamState* s = nullptr;
      if (auto it = state().find(p.unsafeGetTensorImpl()); it != state().end() && it->second) {
        s = static_cast<torch::optim::AdamParamState*>(it->second.get());
      } else {
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        s = fresh.get();
        fresh_states.emplace_back(p.unsafeGetTensorImpl(), std::move(fresh));
      }
      const int64_t next = s->step() + 1;
      auto found = std::find_if(step_tensors.begin(), step_tensors.end(),
                                [&](const StepTensor& t) { return t.device == p.device() && t.count == next; });
      if (found == step_tensors.end()) {
        const auto options = at::TensorOptions().dtype(at::kFloat).device(p.device());
        step_tensors.push_back({p.device(), next, at::scalar_tensor(static_cast<double>(next), options)});
        found = step_tensors.end() - 1;
      }
      stepped.push_back(s);
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s->exp_avg());
      exp_avg_sqs.push_back(s->exp_avg_sq());
      steps.push_back(found->value);
    }
    if (params.empty()) continue;
    for (auto& [key, fresh] : fresh_states) state()[key] = std::move(fresh);
    for (auto* s : stepped) s->step(s->step() + 1);
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, o.lr(),
                     std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(), /*amsgrad=*/false,
                     /*maximize=*/false);
  }
  return loss;
}

}  // namespace qtft::train
