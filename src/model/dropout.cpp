#include "qtft/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

#include "qtft/model/detail/philox_words.h"

namespace qtft::model {
namespace {

// Elements per Philox subsequence. Fixed, so that which numbers an element gets does not
// depend on how at::parallel_for splits the work.
constexpr int64_t kBlock = 4096;

uint64_t draw_key() {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(generator)->random64();
}

// {0, 1/(1-p)} per element: the factor the input is multiplied by. Philox is the costly
// part, so each of its 32-bit numbers serves two elements, 16 bits each (one Philox
// evaluation, 128 bits, serves eight): the keep probability is rounded to a multiple of
// 1/65536 (0.9 keeps with probability 0.899994). Block b's numbers are those of the engine
// keyed by `key` on subsequence b (detail::philox_words, evaluated eight counters at a time).
template <typename scalar_t>
void fill_scaled_mask(scalar_t* mask, int64_t n, double keep, uint64_t key) {
  const auto threshold = static_cast<uint32_t>(std::lround(keep * 65536.0));
  const scalar_t scale = static_cast<scalar_t>(1) / static_cast<scalar_t>(keep);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    std::array<uint32_t, kBlock / 2> words;
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * kBlock;
      const int64_t count = std::min(n - begin, kBlock);
      const int64_t pairs = (count + 1) / 2;
      detail::philox_words(key, static_cast<uint64_t>(b), (pairs + 3) / 4, words.data());
      scalar_t* out = mask + begin;
      for (int64_t k = 0; k < count / 2; ++k) {
        out[2 * k] = (words[k] & 0xffffu) < threshold ? scale : scalar_t(0);
        out[2 * k + 1] = (words[k] >> 16) < threshold ? scale : scalar_t(0);
      }
      if (count % 2 != 0) out[count - 1] = (words[count / 2] & 0xffffu) < threshold ? scale : scalar_t(0);
    }
  });
}

}  // namespace

at::Tensor apply_dropout(const at::Tensor& x, double p, bool training) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "apply_dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return at::mul(x, at::zeros_like(x));
  const bool own_kernel = x.is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble);
  if (!own_kernel) return at::dropout(x, p, /*train=*/true);
  at::Tensor mask = at::empty(x.sizes(), x.options().requires_grad(false));
  const uint64_t key = draw_key();
  // Not an ATen op: named here so that profiles show its time instead of the caller's.
  RECORD_FUNCTION("qtft::dropout_mask", std::vector<c10::IValue>());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "qtft::dropout",
                             [&] { fill_scaled_mask(mask.data_ptr<scalar_t>(), mask.numel(), 1.0 - p, key); });
  return at::mul(x, mask);
}

DropoutImpl::DropoutImpl(double p) : p_(p) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "Dropout: probability must be in [0, 1), got ", p);
}

}  // namespace qtft::model
