#include "qtft/memory/detail/bit_mask.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "memory/bitwise.h"

namespace qtft::memory::detail {
namespace {

// A mask of n bools, about 30% false, and its bits.
struct Mask {
  at::Tensor bools;  // bool [n]
  at::Tensor bits;   // uint8 [ceil(n / 8)]
};

Mask random_mask(int64_t n) {
  Mask m{at::rand({n}) > 0.3, at::empty({(n + 7) / 8}, at::TensorOptions().dtype(at::kByte))};
  pack_bits(m.bools.data_ptr<bool>(), n, m.bits.data_ptr<uint8_t>());
  return m;
}

TEST(BitMaskTest, BitEOfByteEOver8IsElementE) {
  const int64_t n = 21;  // two whole bytes and five bits
  const Mask m = random_mask(n);
  const bool* b = m.bools.data_ptr<bool>();
  const uint8_t* bits = m.bits.data_ptr<uint8_t>();
  for (int64_t e = 0; e < n; ++e) EXPECT_EQ((bits[e / 8] >> (e % 8)) & 1, b[e] ? 1 : 0) << "element " << e;
  EXPECT_EQ(bits[2] >> 5, 0) << "the last byte's unused bits";
}

// Sizes below one task, across several (4096 elements each) and not a multiple of 8; an
// upstream of mixed signs, so that a dropped negative value shows as -0.0.
TEST(BitMaskTest, MultiplyIsAtMulWithTheMaskBitwise) {
  for (const int64_t n : {int64_t{5}, int64_t{4096 * 3 + 13}}) {
    const Mask m = random_mask(n);
    for (const auto dtype : {at::kFloat, at::kDouble}) {
      const at::Tensor x = at::randn({n}, at::TensorOptions().dtype(dtype));
      EXPECT_TRUE(test::bitwise_equal(multiply_by_bits(x, m.bits, 1.0), at::mul(x, m.bools)))
          << n << " elements, " << dtype;
      // keep 0.5: a scale of 2, exact in either type.
      EXPECT_TRUE(test::bitwise_equal(multiply_by_bits(x, m.bits, 0.5), at::mul(x, m.bools.to(dtype) * 2)))
          << n << " elements, " << dtype;
    }
  }
}

TEST(BitMaskTest, RefusesTooFewBits) {
  const Mask m = random_mask(16);
  EXPECT_THROW(multiply_by_bits(at::randn({17}), m.bits, 1.0), c10::Error);
}

}  // namespace
}  // namespace qtft::memory::detail
