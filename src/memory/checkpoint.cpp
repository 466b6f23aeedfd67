#include "qtft/memory/checkpoint.h"

#include <ATen/core/ivalue.h>
#include <ATen/ops/alias.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>

#include <utility>

#include "qtft/common/error.h"
#include "qtft/memory/autocast.h"
#include "qtft/memory/detail/recompute_context.h"
#include "qtft/memory/rng_state.h"

namespace qtft::memory {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Everything a checkpointed segment needs between its forward and its backward. Held by
// the autograd context as a capsule, so it lives exactly as long as the graph does.
struct SegmentState : torch::CustomClassHolder {
  std::string name;
  SegmentFunction fn;
  CheckpointOptions options;
  RecomputeTape tape;
  RngState rng_before;
  // The backward runs outside the forward's autocast region (--precision bf16): the
  // recompute multiplies in the forward's types only with the forward's settings.
  AutocastState autocast;
  std::vector<bool> input_requires_grad;
};

std::vector<c10::Device> devices_of(at::TensorList tensors) {
  std::vector<c10::Device> devices;
  for (const at::Tensor& t : tensors) devices.push_back(t.device());
  return devices;
}

void check_outputs(const std::string& name, const std::vector<at::Tensor>& outputs, at::TensorList inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) {
      throw Error("checkpoint segment '" + name + "': output " + std::to_string(i) + " is undefined");
    }
    for (const at::Tensor& input : inputs) {
      // Autograd would treat it as a view of the input, with a history the segment does not own.
      if (outputs[i].is_same(input)) {
        throw Error("checkpoint segment '" + name + "': output " + std::to_string(i) +
                    " is one of its inputs; pass it around the segment instead");
      }
    }
  }
}

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  // `anchor` requires gradient and is otherwise unused: a custom Function records no
  // backward node unless some tensor input requires gradient, and a segment fed only with
  // data (or with detached tensors) would then leave its parameters without gradients.
  static variable_list forward(AutogradContext* ctx, const at::Tensor& /*anchor*/, at::TensorList inputs,
                               c10::intrusive_ptr<SegmentState> state) {
    state->rng_before = RngState::capture(devices_of(inputs));
    state->autocast = AutocastState::current();
    std::vector<at::Tensor> in(inputs.begin(), inputs.end());
    for (const at::Tensor& t : in) state->input_requires_grad.push_back(t.requires_grad());
    std::vector<at::Tensor> outputs;
    {
      // With gradient on, as the plain forward runs: kernels may take another path without
      // it (LibTorch's CPU LSTM gives other bits) or when their inputs do not require
      // gradient (matmul folds them differently), and the recompute runs with it. The graph
      // this builds is dropped with the segment's intermediates when fn returns; only the
      // detached outputs leave. It costs allocation time, not memory: the recompute holds
      // as much.
      at::AutoGradMode grad_on(true);
      SegmentPassScope scope(SegmentPass::Recording, &state->tape);
      outputs = state->fn(in);
    }
    check_outputs(state->name, outputs, inputs);
    for (at::Tensor& out : outputs) out = out.detach();
    for (const at::Tensor& out : outputs) {
      if (!out.is_floating_point()) ctx->mark_non_differentiable({out});
    }
    // Saved variables carry their version: autograd itself refuses the backward when an
    // input was modified in place after this forward.
    ctx->save_for_backward(in);
    ctx->saved_data["segment"] = c10::IValue::make_capsule(std::move(state));
    // An output nobody used gets no gradient; zeros would add -0.0 + 0.0 = +0.0 somewhere
    // and break bitwise equality with the plain graph, which never sees that output.
    ctx->set_materialize_grads(false);
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<SegmentState>(ctx->saved_data["segment"].toCapsule());
    if (!torch::autograd::Engine::get_default_engine().is_checkpoint_valid()) {
      throw Error("checkpoint segment '" + state->name +
                  "': checkpointing does not work with torch::autograd::grad or backward with explicit inputs "
                  "(the recompute would need the whole graph); call backward() on the loss, or turn "
                  "checkpointing off");
    }
    const variable_list saved = ctx->get_saved_variables();
    std::vector<at::Tensor> inputs;
    inputs.reserve(saved.size());
    for (size_t i = 0; i < saved.size(); ++i) {
      inputs.push_back(saved[i].detach().requires_grad_(state->input_requires_grad[i]));
    }

    // The recompute draws the masks the forward drew; the stream then continues from where
    // the rest of the step had taken it, as if nothing had been recomputed.
    const RngState rng_now = RngState::capture_like(state->rng_before);
    state->rng_before.restore();
    std::vector<at::Tensor> outputs;
    try {
      at::AutoGradMode grad_on(true);
      const AutocastScope autocast(state->autocast);
      const bool replay = state->options.replay_layer_state;
      state->tape.rewind();
      SegmentPassScope scope(replay ? SegmentPass::Replaying : SegmentPass::Plain, replay ? &state->tape : nullptr);
      outputs = state->fn(inputs);
    } catch (...) {
      rng_now.restore();
      throw;
    }
    rng_now.restore();
    if (state->options.replay_layer_state) state->tape.check_replayed_all();
    if (outputs.size() != grad_outputs.size()) {
      throw Error("checkpoint segment '" + state->name + "': the recompute returned " + std::to_string(outputs.size()) +
                  " outputs, the forward " + std::to_string(grad_outputs.size()));
    }

    variable_list roots, root_grads;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (grad_outputs[i].defined() && outputs[i].requires_grad()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grad_outputs[i]);
      }
    }
    if (!roots.empty()) torch::autograd::backward(roots, root_grads);

    // One entry per forward argument: the anchor, each input, the state (not a tensor).
    variable_list grads;
    grads.reserve(inputs.size() + 2);
    grads.emplace_back();
    for (const at::Tensor& input : inputs) grads.push_back(input.requires_grad() ? input.grad() : at::Tensor());
    grads.emplace_back();
    return grads;
  }
};

// The memory layout AccumulateGrad gives the gradient of a leaf shaped like `like` (the
// "gradient layout contract", torch/csrc/autograd/utils/grad_layout_contract.h): the
// leaf's strides when it is dense, else contiguous. Values never change, but later
// kernels pick their summation order by layout, so the plain boundary must hand on its
// gradient in the layout a checkpoint's detached input would.
class LeafGradLayout {
 public:
  explicit LeafGradLayout(const at::Tensor& like)
      : sizes_(like.sizes().vec()), strides_(like.strides().vec()), dense_(like.is_non_overlapping_and_dense()) {}

  at::Tensor operator()(const at::Tensor& grad) const {
    if (!grad.defined() || obeys(grad)) return grad;
    if (dense_) return grad.new_empty_strided(sizes_, strides_).copy_(grad);
    return grad.clone(at::MemoryFormat::Contiguous);
  }

 private:
  bool obeys(const at::Tensor& grad) const {
    if (!dense_) return grad.is_contiguous();
    for (size_t i = 0; i < sizes_.size(); ++i) {
      const int64_t stride = grad.stride(static_cast<int64_t>(i));
      if (grad.size(static_cast<int64_t>(i)) != 1 ? stride != strides_[i] : stride == 0) return false;
    }
    return true;
  }

  std::vector<int64_t> sizes_, strides_;
  bool dense_;
};

std::vector<at::Tensor> run_plain(const SegmentFunction& fn, const std::vector<at::Tensor>& inputs) {
  if (!c10::GradMode::is_enabled()) return fn(inputs);
  std::vector<at::Tensor> bounded;
  bounded.reserve(inputs.size());
  for (const at::Tensor& x : inputs) {
    if (!x.requires_grad()) {
      bounded.push_back(x);
      continue;
    }
    // The alias's grad_fn sums the gradients of every use inside the segment before the
    // hook sees them, as a detached leaf would; the hook then lays the sum out as
    // AccumulateGrad would have.
    at::Tensor alias = at::alias(x);
    alias.register_hook(LeafGradLayout(x));
    bounded.push_back(std::move(alias));
  }
  return fn(bounded);
}

}  // namespace

std::vector<at::Tensor> checkpoint(const std::string& name, const SegmentFunction& fn,
                                   const std::vector<at::Tensor>& inputs, CheckpointOptions options) {
  // Without gradient there is nothing to keep; inside another segment's forward or
  // recompute, the outer segment already decides what is kept.
  if (!c10::GradMode::is_enabled() || current_segment_pass() != SegmentPass::Plain) return run_plain(fn, inputs);
  auto state = c10::make_intrusive<SegmentState>();
  state->name = name;
  state->fn = fn;
  state->options = options;
  state->tape.set_segment_name(name);
  const at::Tensor anchor = at::empty({0}).requires_grad_(true);
  return CheckpointFunction::apply(anchor, at::TensorList(inputs), std::move(state));
}

std::vector<at::Tensor> run_segment(const std::string& name, bool checkpointed, const std::vector<at::Tensor>& inputs,
                                    const SegmentFunction& fn) {
  if (checkpointed) return checkpoint(name, fn, inputs);
  return run_plain(fn, inputs);
}

}  // namespace qtft::memory
