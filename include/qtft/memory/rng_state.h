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

// A random stream that belongs to its owner (a trainer, a model build) rather than to the
// process: the CPU generator's state and, for a CUDA device, that device's generator state.
// LibTorch's dropout and initializers draw only from the default generators (the CPU one,
// and on a GPU the device's CUDA one), so run() lends this stream to them for the call and
// then puts their own states back: the owner's draws are reproducible from its seed and the
// caller's streams do not move. Not for two threads at once: they would share the default
// generators for the duration.
class RandomStream {
 public:
  // Both generators start from `seed`; the CUDA one only when `device` is a CUDA device.
  explicit RandomStream(uint64_t seed, c10::Device device = c10::Device(c10::kCPU));
  void run(const std::function<void()>& fn);
  // uint8, as at::Generator::get_state gives it.
  at::Tensor state() const { return cpu_state_; }
  // Undefined on the CPU.
  at::Tensor cuda_state() const { return cuda_state_; }
  // Throws c10::Error for a tensor that is not a generator state, before anything changes.
  void set_state(const at::Tensor& state);
  // Ignored on the CPU: a CUDA stream has no meaning there.
  void set_cuda_state(const at::Tensor& state);

 private:
  c10::Device device_;
  at::Tensor cpu_state_;
  at::Tensor cuda_state_;
};

}  // namespace qtft::memory
