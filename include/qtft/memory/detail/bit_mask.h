#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <cstring>

namespace qtft::memory::detail {

// Masks a backward pass keeps (dropout's kept elements, fake quantization's unclamped
// ones) as bits: bit e % 8 of byte e / 8 is element e's, in a uint8 tensor of
// ceil(n / 8) bytes. 1/8 of a bool mask's memory and 1/32 of a float mask's, and the
// product below reads them directly, where at::mul(grad, bool_mask) first copies the mask
// into a float tensor of its own.

// The byte of eight bools (each 0 or 1) at `mask`, the first at bit 0: one 64-bit multiply
// gathers bit 0 of each byte into the top byte.
inline uint8_t pack_eight(const bool* mask) {
  uint64_t v;
  std::memcpy(&v, mask, sizeof v);
  return static_cast<uint8_t>((v * 0x0102040810204080ull) >> 56);
}

// bits[0, ceil(n / 8)) from mask[0, n); the last byte's unused bits are 0.
inline void pack_bits(const bool* mask, int64_t n, uint8_t* bits) {
  const int64_t whole = n / 8;
  for (int64_t j = 0; j < whole; ++j) bits[j] = pack_eight(mask + 8 * j);
  if (n % 8 == 0) return;
  unsigned last = 0;
  for (int64_t e = 8 * whole; e < n; ++e) last |= static_cast<unsigned>(mask[e]) << (e % 8);
  bits[whole] = static_cast<uint8_t>(last);
}

// x * (bit ? 1 / keep : 0) for every element of x, 1 / keep computed in x's type: bitwise
// what at::mul(x, mask) gives with a float mask of those two values (with keep 1, what
// at::mul(x, bool_mask) gives). A bfloat16 x is multiplied in float and rounded once.
// x: contiguous, float, double or bfloat16, on the CPU, with bits for at least x.numel()
// elements.
at::Tensor multiply_by_bits(const at::Tensor& x, const at::Tensor& bits, double keep);

}  // namespace qtft::memory::detail
