#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

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

}  // namespace qtft::memory
