#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>

#include "qtft/quant/observer_update.h"
#include "qtft/quant/quant_params.h"

namespace qtft::quant {

struct ActivationFakeQuantOptions {
  TORCH_ARG(int64_t, bits) = 8;
  // Weight of the newest batch in the moving-average min/max, in (0, 1].
  TORCH_ARG(double, averaging_constant) = 0.01;
};

// Per-tensor affine fake quantization of an activation (unsigned, 0..2^bits-1) with a
// moving-average min/max observer, on ATen's kernels.
//
// State, all registered as buffers so that it is saved with the model and follows .to():
//   running_min, running_max  float [1], +inf / -inf until the first observation
//   scale                     float [1]
//   zero_point                int32 [1]
//   samples                   int64 [1], how many batches the observer has taken in
//                             (training forwards and calibrate calls alike)
//   frozen                    bool  [1]
//
// The observer follows ATen's fused op: the first observation sets min and max to the
// batch's; later ones move them by m += c * (batch - m), in float. Scale and zero point are
// recomputed from the new min and max before the batch itself is fake-quantized (see
// affine_qparams for the rule).
//
// forward(x):
//   training, not frozen  observe x, then fake-quantize it with the updated parameters
//                         (Immediate); or record x's min and max for the step's end and
//                         fake-quantize x with the stored parameters (Step)
//   frozen, or eval mode  fake-quantize with the stored parameters; no state changes
//   under checkpointing   the segment's first forward observes and records the parameters it
//                         used; its recompute replays them per call and changes nothing, so
//                         the observer updates once per step (see memory/recompute_context.h);
//                         in Step mode the parameters cannot change before the step's end,
//                         so the recompute just uses them, and records nothing
//   never observed        x is returned unchanged (in any mode; Step mode still records
//                         it): there are no parameters
//                         yet, and ATen would invent scale 0.1 and zero point 0, which
//                         silently clips every negative value to 0.
//
// x is taken by value: a temporary (the product just before the observer) or a tensor moved
// in, when nothing else shares its memory, is fake-quantized in its own memory
// (quant::fake_quantize_per_tensor); an x the caller keeps is left as it was.
//
// x must be a non-empty float32 tensor. Deciding the mode reads host copies of the frozen
// flag and the sample count, not the buffers, so that a CUDA step does not synchronize once
// per observer. The copies follow every change the observer makes, and a change made to
// the buffers from outside (a load copies into them) is seen through the buffers' version
// counters, which live on the host, and read back once.
class ActivationFakeQuantImpl : public torch::nn::Module {
 public:
  explicit ActivationFakeQuantImpl(ActivationFakeQuantOptions options = {});

  at::Tensor forward(at::Tensor x);

  // x fake-quantized with the stored parameters (x itself when never observed), in any mode,
  // changing and recording nothing: a second use of an activation the step's forward has
  // already taken in, bitwise what forward returned for it then (the selection networks
  // embed their inputs again from the raw columns instead of keeping the embeddings).
  at::Tensor reapply(at::Tensor x) const;

  // The parameters forward (or reapply) fake-quantizes with: scale (float [1]) and zero
  // point (int32 [1]).
  struct Parameters {
    at::Tensor scale;
    at::Tensor zero_point;
  };
  // forward and reapply in two halves, so that a group of observers can fake-quantize
  // their slices of one tensor in one pass (quant/grouped_observer.h). forward_parameters
  // makes every state change forward(x) would make, given x's [min, max] (float [2]) through
  // `extremes`, which it calls only when the mode needs them, and returns the parameters
  // forward would then fake-quantize x with: std::nullopt where forward returns x unchanged.
  // reapply_parameters is the same for reapply, and changes nothing.
  std::optional<Parameters> forward_parameters(const std::function<at::Tensor()>& extremes);
  std::optional<Parameters> reapply_parameters() const;

  // Observes x without gradient, whatever the training mode, and returns it fake-quantized:
  // one calibration batch, counted in samples(). Throws qtft::Error on a frozen observer,
  // whose parameters were promised not to change.
  at::Tensor calibrate(const at::Tensor& x);

  // Stops (and restarts) observation; scale and zero point stay exactly as they are.
  void freeze();
  void unfreeze();

  // Data parallelism: called on each observation with the batch's [min, max] (float [2],
  // on x's device) before the moving average takes it in, to replace them in place by the
  // min and max over every process, so that all of them update to the same scale and zero
  // point. Empty (the default): this process's batch alone.
  using ExtremesReducer = std::function<void(at::Tensor& min_max)>;
  void set_extremes_reducer(ExtremesReducer reducer) { extremes_reducer_ = std::move(reducer); }
  bool is_frozen() const;

  // Immediate by default. Switching to Immediate drops a step's unfinished record.
  void set_update(ObserverUpdate update);
  // Step mode: the min and max (float [2]) of everything the observer took in since the
  // step began; undefined when it took in nothing.
  const at::Tensor& step_extremes() const { return step_extremes_; }
  // Step mode: the step's one update from `min_max` (float [2]: the step's extremes, over
  // every rank under data parallelism). The moving average takes it in, scale and zero
  // point follow, the sample count grows by one, and the step's record is cleared.
  void end_step(const at::Tensor& min_max);

  int64_t samples() const;
  QParams qparams() const;
  QuantRange range() const { return range_; }
  const ActivationFakeQuantOptions& options() const { return options_; }

  void pretty_print(std::ostream& stream) const override;

 private:
  // Updates min, max, scale, zero point and the sample count from a batch's [min, max]
  // (float [2]), through the extremes reducer when there is one.
  void observe(at::Tensor min_max);
  // The moving-average update from a batch's [min, max] (float [2]), counted as a sample.
  void take_in(const at::Tensor& min_max);
  // Step mode: widens the step's record by a batch's [min, max] (float [2]).
  void record_step_extremes(const at::Tensor& min_max);
  // Fake-quantizes x with the given parameters and touches no state. A replay of an
  // observed call (recompute under checkpointing) goes through here with the parameters
  // that call produced; the result is bitwise what observe returned.
  at::Tensor fake_quantize_with(at::Tensor x, const at::Tensor& scale, const at::Tensor& zero_point) const;
  // The int64 "on" flag the fused op takes, kept on the device of the latest input.
  const at::Tensor& on_flag(const at::Device& device);

  // A buffer's value as last read on the host, and the buffer's version then. Atomic because
  // concurrent forecasts may refresh it at once (all with the same value).
  struct HostCopy {
    std::atomic<int64_t> value{0};
    std::atomic<int64_t> version{-1};
  };
  // The buffer's value, read from the device only when its version moved.
  static int64_t read_through(const at::Tensor& buffer, HostCopy& copy);
  // Records a value the observer itself just wrote into the buffer.
  static void wrote(const at::Tensor& buffer, HostCopy& copy, int64_t value);

  ActivationFakeQuantOptions options_;
  QuantRange range_;
  at::Tensor running_min_;
  at::Tensor running_max_;
  at::Tensor scale_;
  at::Tensor zero_point_;
  at::Tensor samples_;
  at::Tensor frozen_;
  at::Tensor on_flag_;
  ExtremesReducer extremes_reducer_;
  ObserverUpdate update_ = ObserverUpdate::Immediate;
  at::Tensor step_extremes_;
  mutable HostCopy samples_host_;
  mutable HostCopy frozen_host_;
};
TORCH_MODULE(ActivationFakeQuant);

}  // namespace qtft::quant
