#include "qtft/memory/detail/bit_mask.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <algorithm>

namespace qtft::memory::detail {
namespace {

// Elements per task: a multiple of 8, so that a byte of bits never straddles two tasks.
constexpr int64_t kBlock = 4096;

// out[e] = x[e] * (bit e ? scale : 0) for e in [begin, end), begin a multiple of 8, computed
// in opmath_t (float for bf16, which then rounds once, as LibTorch's own kernels do; the type
// itself otherwise). Built for AVX2 as well as the baseline; the loader picks the one the CPU runs.
template <typename scalar_t, typename opmath_t>
__attribute__((target_clones("avx2", "default"))) void multiply_range(const scalar_t* x, const uint8_t* bits,
                                                                      opmath_t scale, int64_t begin, int64_t end,
                                                                      scalar_t* out) {
  for (int64_t j = begin / 8; j < end / 8; ++j) {
    const unsigned byte = bits[j];
    for (int t = 0; t < 8; ++t)
      out[8 * j + t] =
          static_cast<scalar_t>(static_cast<opmath_t>(x[8 * j + t]) * (((byte >> t) & 1u) != 0 ? scale : opmath_t(0)));
  }
  for (int64_t e = std::max(begin, end - end % 8); e < end; ++e) {
    out[e] = static_cast<scalar_t>(static_cast<opmath_t>(x[e]) *
                                   (((bits[e / 8] >> (e % 8)) & 1u) != 0 ? scale : opmath_t(0)));
  }
}

}  // namespace

at::Tensor multiply_by_bits(const at::Tensor& x, const at::Tensor& bits, double keep) {
  TORCH_CHECK(x.is_cpu() && x.is_contiguous() &&
                  (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble || x.scalar_type() == at::kBFloat16),
              "multiply_by_bits: expected a contiguous float, double or bfloat16 CPU tensor, got ", x.scalar_type(),
              " on ", x.device());
  const int64_t n = x.numel();
  TORCH_CHECK(bits.is_cpu() && bits.scalar_type() == at::kByte && bits.is_contiguous() && bits.numel() * 8 >= n,
              "multiply_by_bits: expected contiguous uint8 bits for ", n, " elements, got ", bits.scalar_type(), " ",
              bits.sizes());
  at::Tensor out = at::empty(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "qtft::multiply_by_bits", [&] {
    using opmath_t = at::opmath_type<scalar_t>;
    const opmath_t s = static_cast<opmath_t>(1) / static_cast<opmath_t>(keep);
    const scalar_t* in = x.data_ptr<scalar_t>();
    const uint8_t* b = bits.data_ptr<uint8_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, (n + kBlock - 1) / kBlock, 1, [&](int64_t first, int64_t last) {
      multiply_range(in, b, s, first * kBlock, std::min(n, last * kBlock), o);
    });
  });
  return out;
}

}  // namespace qtft::memory::detail
