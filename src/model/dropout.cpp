#include "qtft/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <vector>

#include "qtft/memory/detail/bit_mask.h"
#include "qtft/memory/detail/recompute_context.h"
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

// Bit e % 8 of byte e / 8 says whether element e is kept. Philox is the costly part, so
// each of its 32-bit numbers serves two elements, 16 bits each (one Philox evaluation, 128
// bits, serves eight): the keep probability is rounded to a multiple of 1/65536 (0.9 keeps
// with probability 0.899994). Block b's numbers are those of the engine keyed by `key` on
// subsequence b (detail::philox_words, evaluated eight counters at a time). The bits, not a
// float mask, are what the backward pass keeps: 1/32 of the memory.
at::Tensor draw_keep_bits(int64_t n, double keep, uint64_t key) {
  // Not an ATen op: named here so that profiles show its time instead of the caller's.
  RECORD_FUNCTION("qtft::dropout_mask", std::vector<c10::IValue>());
  const auto threshold = static_cast<uint32_t>(std::lround(keep * 65536.0));
  at::Tensor bits = at::empty({(n + 7) / 8}, at::TensorOptions().dtype(at::kByte));
  uint8_t* out = bits.data_ptr<uint8_t>();
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    std::array<uint32_t, kBlock / 2> words;
    for (int64_t b = first; b < last; ++b) {
      const int64_t count = std::min(n - b * kBlock, kBlock);
      const int64_t bytes = (count + 7) / 8;
      // Four words per byte, and four words per evaluation: `bytes` evaluations.
      detail::philox_words(key, static_cast<uint64_t>(b), bytes, words.data());
      uint8_t* block_bits = out + b * (kBlock / 8);
      for (int64_t j = 0; j < bytes; ++j) {
        unsigned byte = 0;
        for (int t = 0; t < 4; ++t) {
          const uint32_t word = words[4 * j + t];
          byte |= static_cast<unsigned>((word & 0xffffu) < threshold) << (2 * t);
          byte |= static_cast<unsigned>((word >> 16) < threshold) << (2 * t + 1);
        }
        block_bits[j] = static_cast<uint8_t>(byte);
      }
    }
  });
  return bits;
}

at::Tensor apply_keep_bits(const at::Tensor& x, const at::Tensor& bits, double keep) {
  RECORD_FUNCTION("qtft::dropout_apply", std::vector<c10::IValue>());
  return memory::detail::multiply_by_bits(x, bits, keep);
}

// The gradient of x * mask is grad * mask: the same kernel on the same bits.
class KeepBitsDropout : public torch::autograd::Function<KeepBitsDropout> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bits,
                            double keep) {
    ctx->save_for_backward({bits});
    ctx->saved_data["keep"] = keep;
    return apply_keep_bits(x, bits, keep);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor bits = ctx->get_saved_variables()[0];
    return {apply_keep_bits(grad_outputs[0].contiguous(), bits, ctx->saved_data["keep"].toDouble()), at::Tensor(),
            at::Tensor()};
  }
};

// The keep bits of this call: drawn, and recorded when a checkpointed segment runs its first
// forward; in its recompute, the recorded ones (replayed, not drawn again). The key is drawn
// either way, so the generator moves on as it did the first time.
at::Tensor keep_bits_for_call(int64_t n, double keep, const void* layer) {
  const uint64_t key = draw_key();
  memory::RecomputeTape* tape = layer != nullptr ? memory::current_tape() : nullptr;
  if (tape != nullptr && memory::current_segment_pass() == memory::SegmentPass::Replaying) {
    return tape->next(layer, "a dropout layer")[0];
  }
  at::Tensor bits = draw_keep_bits(n, keep, key);
  if (tape != nullptr && memory::current_segment_pass() == memory::SegmentPass::Recording) tape->record(layer, {bits});
  return bits;
}

}  // namespace

at::Tensor apply_dropout(const at::Tensor& x, double p, bool training, const void* layer) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "apply_dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return at::mul(x, at::zeros_like(x));
  const bool own_kernel = x.is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble ||
                                         x.scalar_type() == at::kBFloat16);
  if (!own_kernel) return at::dropout(x, p, /*train=*/true);
  const double keep = 1.0 - p;
  const at::Tensor in = x.contiguous();
  const at::Tensor bits = keep_bits_for_call(in.numel(), keep, layer);
  if (c10::GradMode::is_enabled() && in.requires_grad()) return KeepBitsDropout::apply(in, bits, keep);
  return apply_keep_bits(in, bits, keep);
}

DropoutImpl::DropoutImpl(double p) : p_(p) {
  TORCH_CHECK(p >= 0.0 && p < 1.0, "Dropout: probability must be in [0, 1), got ", p);
}

}  // namespace qtft::model
