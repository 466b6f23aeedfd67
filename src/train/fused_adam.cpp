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
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state()[p.unsafeGetTensorImpl()];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamParamState>();
        fresh->step(0);
        fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*slot);
      s.step(s.step() + 1);
      auto found = std::find_if(step_tensors.begin(), step_tensors.end(),
                                [&](const StepTensor& t) { return t.device == p.device() && t.count == s.step(); });
      if (found == step_tensors.end()) {
        const auto options = at::TensorOptions().dtype(at::kFloat).device(p.device());
        step_tensors.push_back({p.device(), s.step(), at::scalar_tensor(static_cast<double>(s.step()), options)});
        found = step_tensors.end() - 1;
      }
      const at::Tensor& count = found->value;
      params.push_back(p);
      grads.push_back(p.grad());
      exp_avgs.push_back(s.exp_avg());
      exp_avg_sqs.push_back(s.exp_avg_sq());
      steps.push_back(count);
    }
    if (params.empty()) continue;
    at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, o.lr(),
                     std::get<0>(o.betas()), std::get<1>(o.betas()), o.weight_decay(), o.eps(), /*amsgrad=*/false,
                     /*maximize=*/false);
  }
  return loss;
}

}  // namespace qtft::train
