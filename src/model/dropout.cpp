#include "qtft/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/PhiloxRNGEngine.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

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

// {0, 1/(1-p)} per element: the factor the input is multiplied by. The 10-round Philox is
// the costly part, so each of its 32-bit numbers serves two elements, 16 bits each (one
// Philox evaluation, 128 bits, serves eight): the keep probability is rounded to a multiple
// of 1/65536 (0.9 keeps with probability 0.899994).
template <typename scalar_t>
void fill_scaled_mask(scalar_t* mask, int64_t n, double keep, uint64_t key) {
  const auto threshold = static_cast<uint32_t>(std::lround(keep * 65536.0));
  const scalar_t scale = static_cast<scalar_t>(1) / static_cast<scalar_t>(keep);
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      at::Philox4_32 engine(key, static_cast<uint64_t>(b), 0);
      const int64_t end = std::min(n, (b + 1) * kBlock);
      for (int64_t i = b * kBlock; i < end; i += 2) {
        const uint32_t bits = engine();
        mask[i] = (bits & 0xffffu) < threshold ? scale : scalar_t(0);
        if (i + 1 < end) mask[i + 1] = (bits >> 16) < threshold ? scale : scalar_t(0);
      }
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
