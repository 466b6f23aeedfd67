#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace qtft::memory {

// The state of the default random generators a computation draws from: the CPU one, and
// the CUDA one of each given CUDA device. Restoring it makes dropout draw the same masks.
class RngState {
 public:
  // CPU always; CUDA for each CUDA device among `devices` (duplicates and CPU ignored).
  static RngState capture(const std::vector<c10::Device>& devices = {});
  // The state of the same generators as `other`, now.
  static RngState capture_like(const RngState& other);
  void restore() const;

 private:
  at::Tensor cpu_;
  std::vector<std::pair<c10::Device, at::Tensor>> cuda_;
};

// A CPU random stream that belongs to its owner (a trainer, a model build) rather than to
// the process. LibTorch's dropout and initializers draw only from the default CPU
// generator, so run() lends this stream to it for the call and then puts the default
// generator's own state back: the owner's draws are reproducible from its seed and the
// caller's stream does not move. Not for two threads at once: they would share the one
// default generator for the duration.
class CpuRandomStream {
 public:
  explicit CpuRandomStream(uint64_t seed);
  void run(const std::function<void()>& fn);
  at::Tensor state() const { return state_; }  // uint8, as at::Generator::get_state gives it
  void set_state(const at::Tensor& state);

 private:
  at::Tensor state_;
};

}  // namespace qtft::memory
