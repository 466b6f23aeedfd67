#include "qtft/quant/activation_observer.h"

#include <ATen/ops/aminmax.h>
#include <ATen/ops/full.h>
#include <ATen/ops/fused_moving_avg_obs_fake_quant.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <limits>
#include <string>
#include <utility>

#include "qtft/common/error.h"
#include "qtft/memory/autocast.h"
#include "qtft/memory/detail/recompute_context.h"
#include "qtft/quant/detail/fake_quantize.h"

namespace qtft::quant {
namespace {

void check_input(const at::Tensor& x) {
  // The fused CPU kernel reads min and max through float pointers and reduces over all of x,
  // so anything else would fail deep inside ATen with a message naming neither.
  TORCH_CHECK(x.defined() && x.scalar_type() == at::kFloat, "ActivationFakeQuant: expected a float32 tensor, got ",
              x.defined() ? c10::toString(x.scalar_type()) : "an undefined tensor");
  TORCH_CHECK(x.numel() > 0, "ActivationFakeQuant: expected a non-empty tensor, got shape ", x.sizes());
}

// x's [min, max] (float [2]), without gradient.
at::Tensor extremes_of(const at::Tensor& x) {
  c10::NoGradGuard no_grad;
  auto [min, max] = at::aminmax(x);
  return at::stack({min, max});
}

}  // namespace

ActivationFakeQuantImpl::ActivationFakeQuantImpl(ActivationFakeQuantOptions options)
    : options_(options), range_(activation_range(options.bits())) {
  const double c = options_.averaging_constant();
  // Written as a negation so that NaN fails too.
  if (!(c > 0.0 && c <= 1.0)) {
    throw UsageError("activation observer: averaging constant must be in (0, 1], got " + std::to_string(c));
  }
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  // +-inf is "never observed": the fused op replaces an infinite bound outright instead of
  // averaging into it.
  running_min_ = register_buffer("running_min", at::full({1}, std::numeric_limits<float>::infinity(), f32));
  running_max_ = register_buffer("running_max", at::full({1}, -std::numeric_limits<float>::infinity(), f32));
  // ATen's FakeQuantize starts from scale 1 and zero point 0 as well; they are not used
  // before the first observation (see forward).
  scale_ = register_buffer("scale", at::ones({1}, f32));
  zero_point_ = register_buffer("zero_point", at::zeros({1}, at::TensorOptions().dtype(at::kInt)));
  samples_ = register_buffer("samples", at::zeros({1}, at::TensorOptions().dtype(at::kLong)));
  frozen_ = register_buffer("frozen", at::zeros({1}, at::TensorOptions().dtype(at::kBool)));
}

at::Tensor ActivationFakeQuantImpl::forward(at::Tensor x) {
  // Extremes and fake quantization in FP32 (a bf16 product's output is widened first): an
  // observer's range and its int8 grid are those of the FP32 model it exports.
  x = memory::full_precision(x);
  check_input(x);
  const std::optional<Parameters> parameters = forward_parameters([&x] { return extremes_of(x); });
  if (!parameters) return x;
  return fake_quantize_with(std::move(x), parameters->scale, parameters->zero_point);
}

std::optional<ActivationFakeQuantImpl::Parameters> ActivationFakeQuantImpl::forward_parameters(
    const std::function<at::Tensor()>& extremes) {
  if (is_training() && !is_frozen() && update_ == ObserverUpdate::Step) {
    // The parameters stay the step's until end_step, so a recompute quantizes exactly as
    // the first pass did; only the first pass records, so the step counts x once.
    if (memory::current_segment_pass() != memory::SegmentPass::Replaying) record_step_extremes(extremes());
    return reapply_parameters();
  }
  if (is_training() && !is_frozen()) {
    // Under checkpointing a segment runs twice per step; the observer must update once and
    // both runs must quantize with the parameters of that update (recompute_context.h).
    switch (memory::current_segment_pass()) {
      case memory::SegmentPass::Plain: observe(extremes()); return Parameters{scale_, zero_point_};
      case memory::SegmentPass::Recording: {
        observe(extremes());
        memory::current_tape()->record(this, {scale_.clone(), zero_point_.clone()});
        return Parameters{scale_, zero_point_};
      }
      case memory::SegmentPass::Replaying: {
        const auto& recorded = memory::current_tape()->next(this, "an activation observer");
        return Parameters{recorded[0], recorded[1]};
      }
    }
  }
  return reapply_parameters();
}

at::Tensor ActivationFakeQuantImpl::reapply(at::Tensor x) const {
  x = memory::full_precision(x);
  check_input(x);
  const std::optional<Parameters> parameters = reapply_parameters();
  if (!parameters) return x;
  return fake_quantize_with(std::move(x), parameters->scale, parameters->zero_point);
}

std::optional<ActivationFakeQuantImpl::Parameters> ActivationFakeQuantImpl::reapply_parameters() const {
  if (samples() == 0) return std::nullopt;
  return Parameters{scale_, zero_point_};
}

at::Tensor ActivationFakeQuantImpl::calibrate(const at::Tensor& input) {
  const at::Tensor x = memory::full_precision(input);
  check_input(x);
  if (is_frozen()) {
    throw Error(
        "activation observer: cannot calibrate a frozen observer (its scale and zero point are fixed); "
        "calibrate before freezing");
  }
  c10::NoGradGuard no_grad;
  observe(extremes_of(x));
  return fake_quantize_with(x, scale_, zero_point_);
}

void ActivationFakeQuantImpl::freeze() {
  frozen_.fill_(true);
  wrote(frozen_, frozen_host_, 1);
}

void ActivationFakeQuantImpl::unfreeze() {
  frozen_.fill_(false);
  wrote(frozen_, frozen_host_, 0);
}

void ActivationFakeQuantImpl::set_update(ObserverUpdate update) {
  update_ = update;
  if (update_ == ObserverUpdate::Immediate) step_extremes_ = at::Tensor();
}

void ActivationFakeQuantImpl::end_step(const at::Tensor& min_max) {
  if (update_ != ObserverUpdate::Step) throw Error("activation observer: end_step outside the step mode");
  if (is_frozen()) throw Error("activation observer: end_step on a frozen observer");
  c10::NoGradGuard no_grad;
  take_in(min_max.to(running_min_.device(), at::kFloat).reshape({2}));
  step_extremes_ = at::Tensor();
}

void ActivationFakeQuantImpl::record_step_extremes(const at::Tensor& min_max) {
  c10::NoGradGuard no_grad;
  step_extremes_ =
      step_extremes_.defined()
          ? at::stack({at::minimum(min_max[0], step_extremes_[0]), at::maximum(min_max[1], step_extremes_[1])})
          : min_max;
}

bool ActivationFakeQuantImpl::is_frozen() const { return read_through(frozen_, frozen_host_) != 0; }

int64_t ActivationFakeQuantImpl::samples() const { return read_through(samples_, samples_host_); }

int64_t ActivationFakeQuantImpl::read_through(const at::Tensor& buffer, HostCopy& copy) {
  const int64_t version = buffer._version();
  if (copy.version.load() != version) {
    copy.value.store(buffer.scalar_type() == at::kBool ? int64_t{buffer.item<bool>()} : buffer.item<int64_t>());
    copy.version.store(version);
  }
  return copy.value.load();
}

void ActivationFakeQuantImpl::wrote(const at::Tensor& buffer, HostCopy& copy, int64_t value) {
  copy.value.store(value);
  copy.version.store(buffer._version());
}

QParams ActivationFakeQuantImpl::qparams() const {
  return {static_cast<double>(scale_.item<float>()), static_cast<int64_t>(zero_point_.item<int32_t>())};
}

void ActivationFakeQuantImpl::pretty_print(std::ostream& stream) const {
  stream << "qtft::quant::ActivationFakeQuant(bits=" << options_.bits()
         << ", averaging_constant=" << options_.averaging_constant() << ")";
}

void ActivationFakeQuantImpl::observe(at::Tensor min_max) {
  // ATen's fused op updates running_min/max, scale and zero_point in place from the min and
  // max of what it is given, and nothing else of it; given just those two values it does
  // the observer's arithmetic exactly as on the batch. The caller fake-quantizes the batch
  // itself with fake_quantize_per_tensor (bitwise what the fused op's own kernel would give).
  if (extremes_reducer_) {
    c10::NoGradGuard no_grad;
    extremes_reducer_(min_max);
  }
  take_in(min_max);
}

void ActivationFakeQuantImpl::take_in(const at::Tensor& extremes) {
  const at::Tensor& on = on_flag(extremes.device());
  at::fused_moving_avg_obs_fake_quant(extremes, on, on, running_min_, running_max_, scale_, zero_point_,
                                      options_.averaging_constant(), range_.qmin, range_.qmax,
                                      /*ch_axis=*/0, /*per_row_fake_quant=*/false, /*symmetric_quant=*/false);
  // Counted on the device, and on the host: no synchronization.
  const int64_t seen = samples();
  samples_.add_(1);
  wrote(samples_, samples_host_, seen + 1);
}

at::Tensor ActivationFakeQuantImpl::fake_quantize_with(at::Tensor x, const at::Tensor& scale,
                                                       const at::Tensor& zero_point) const {
  // Scale and zero point are read on the device: no synchronization.
  return fake_quantize_per_tensor(std::move(x), scale, zero_point, range_.qmin, range_.qmax);
}

const at::Tensor& ActivationFakeQuantImpl::on_flag(const at::Device& device) {
  if (!on_flag_.defined() || on_flag_.device() != device) {
    on_flag_ = at::ones({1}, at::TensorOptions().dtype(at::kLong).device(device));
  }
  return on_flag_;
}

}  // namespace qtft::quant
