#pragma once

#include <ATen/core/Tensor.h>

#include <cstring>

namespace qtft::test {

// Same dtype, shape and bytes: unlike at::equal, tells +0.0 from -0.0 and matches NaNs
// bit for bit. What "bit-identical" promises are checked with.
inline bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor ca = a.detach().cpu().contiguous(), cb = b.detach().cpu().contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

}  // namespace qtft::test
