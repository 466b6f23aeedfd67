#include "qtft/quant/detail/fake_quantize.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/fake_quantize_per_tensor_affine.h>
#include <ATen/ops/stack.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "qtft/memory/detail/bit_mask.h"

namespace qtft::quant {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// v rounded to the nearest integer, ties to even, as nearbyint does in the default rounding
// mode, in a form the compiler vectorizes (nearbyint is a library call without SSE4.1):
// adding 2^23 with v's sign leaves no fraction bits, so the addition itself rounds, and
// subtracting it back is exact. Floats of magnitude 2^23 and above (and inf, NaN) are
// integers already and pass as they are. A result of -0.0 may come out as +0.0; the caller
// adds the zero point next, which turns nearbyint's -0.0 into +0.0 as well. Both sides are
// computed before the choice, as selects without branches (the compiler does not
// speculate floating-point work it would have to keep from trapping).
inline float round_ties_even(float v) {
  constexpr float kTwo23 = 8388608.0f;
  const float shift = std::copysign(kTwo23, v);
  const float rounded = (v + shift) - shift;
  return std::fabs(v) < kTwo23 ? rounded : v;
}

// ATen's kernel computes, per element, q = zero_point + nearbyint(x * (1 / scale)), the mask
// qmin <= q <= qmax, and (clamp(q, qmin, qmax) - zero_point) * scale. The same steps here,
// in float and in one pass over x[0, n): q and zero_point are integers far below 2^24, so
// every sum is exact; clamp(q) == q is the mask without two more comparisons (NaN fails
// it, as it fails ATen's). `mask` may be null (no gradient wanted). Built for AVX2 as well
// as the baseline; the loader picks the one the CPU runs. The file is compiled without
// trapping math (src/CMakeLists.txt), which changes no result (it only lets the compiler
// assume no floating-point exception traps) and turns the comparisons into vector selects.
__attribute__((target_clones("avx2", "default"))) void fake_quantize_range(const float* x, float* out, bool* mask,
                                                                           int64_t n, float inverse, float scale,
                                                                           float zero_point, float qmin, float qmax) {
  // x and out are the same array (in place) or disjoint, never offset from each other:
  // element i is read before it is written and no iteration touches another's element, so
  // the loops vectorize without GCC's runtime overlap check, whose fallback for equal
  // pointers is the scalar loop.
  if (mask) {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) {
      const float q = round_ties_even(x[i] * inverse) + zero_point;
      const float low = q < qmin ? qmin : q;
      const float clamped = low > qmax ? qmax : low;
      mask[i] = clamped == q;
      out[i] = (clamped - zero_point) * scale;
    }
  } else {
#pragma GCC ivdep
    for (int64_t i = 0; i < n; ++i) {
      const float q = round_ties_even(x[i] * inverse) + zero_point;
      const float low = q < qmin ? qmin : q;
      out[i] = ((low > qmax ? qmax : low) - zero_point) * scale;
    }
  }
}

// Elements per task at least, as ATen's elementwise kernels split their work; a multiple
// of 8, so that a byte of the mask's bits never straddles two tasks.
constexpr int64_t kGrain = 32768;
// Elements whose bool mask is packed into bits at a time: the bools stay in L1.
constexpr int64_t kChunk = 512;

// The parameters of x's slices: x seen as [outer, slices, inner] (contiguous), slice s of
// it quantized with scale[s] and zero_point[s]. Per tensor: one slice.
struct SliceParameters {
  int64_t slices = 1;
  int64_t inner = 0;
  std::vector<float> scale;
  std::vector<float> zero_point;
};

// Elements [begin, end) of x fake-quantized into out (and their mask, from mask[0]), each
// run of one slice with that slice's parameters.
void fake_quantize_slices(const float* x, float* out, bool* mask, int64_t begin, int64_t end, const SliceParameters& p,
                          float qmin, float qmax) {
  while (begin < end) {
    const int64_t block = begin / p.inner;
    const int64_t stop = std::min(end, (block + 1) * p.inner);
    const auto s = static_cast<size_t>(block % p.slices);
    const float scale = p.scale[s];
    const float inverse = 1.0f / scale;  // as at::reciprocal computes it
    fake_quantize_range(x + begin, out + begin, mask, stop - begin, inverse, scale, p.zero_point[s], qmin, qmax);
    if (mask) mask += stop - begin;
    begin = stop;
  }
}

// out = x fake-quantized, and `bits` (when not null) the mask as memory::detail's bits.
void fake_quantize_pass(const float* x, float* out, uint8_t* bits, int64_t n, const SliceParameters& p, float qmin,
                        float qmax) {
  at::parallel_for(0, (n + kGrain - 1) / kGrain, 1, [&](int64_t first, int64_t last) {
    const int64_t end = std::min(n, last * kGrain);
    if (!bits) {
      fake_quantize_slices(x, out, nullptr, first * kGrain, end, p, qmin, qmax);
      return;
    }
    std::array<bool, kChunk> mask;
    for (int64_t begin = first * kGrain; begin < end; begin += kChunk) {
      const int64_t count = std::min(kChunk, end - begin);
      fake_quantize_slices(x, out, mask.data(), begin, begin + count, p, qmin, qmax);
      memory::detail::pack_bits(mask.data(), count, bits + begin / 8);
    }
  });
}

// True when nothing but the caller's one handle reaches x's memory: no other tensor, view or
// saved variable (a saved output keeps its storage), and x covers all of it. Such an x,
// typically the fresh output of the product before an observer, is dead once quantized, so
// the result may take its place: one activation-sized allocation less per observer, whose
// fresh pages cost more than the pass itself in a large step.
bool sole_owner_of_its_memory(const at::Tensor& x) {
  return x.use_count() == 1 && x.storage().use_count() == 1 && x.is_contiguous() && x.storage_offset() == 0 &&
         static_cast<size_t>(x.numel()) * x.element_size() == x.storage().nbytes() &&
         (!x.requires_grad() || !x.is_leaf());
}

// x fake-quantized (into x itself when `in_place`), and the bits of the values that were not
// clamped when `with_mask`.
std::pair<at::Tensor, at::Tensor> fake_quantize_cpu(const at::Tensor& input, const SliceParameters& p, int64_t qmin,
                                                    int64_t qmax, bool with_mask, bool in_place) {
  // Not an ATen op: named here so that profiles show its time instead of the caller's.
  RECORD_FUNCTION("qtft::fake_quantize", std::vector<c10::IValue>());
  const at::Tensor x = input.contiguous();  // input itself when in place (contiguous then)
  at::Tensor out = in_place ? x : at::empty(x.sizes(), x.options());
  at::Tensor bits = with_mask ? at::empty({(x.numel() + 7) / 8}, x.options().dtype(at::kByte)) : at::Tensor();
  // Element i is read before it is written, so in place is the same pass
  // (fake_quantize_range).
  fake_quantize_pass(x.data_ptr<float>(), out.data_ptr<float>(), with_mask ? bits.data_ptr<uint8_t>() : nullptr,
                     x.numel(), p, static_cast<float>(qmin), static_cast<float>(qmax));
  if (in_place && !out.is_inference()) torch::autograd::impl::bump_version(out);
  return {out, bits};
}

// Per tensor or per slice: the parameters are read on the host before the pass.
class FakeQuantize : public torch::autograd::Function<FakeQuantize> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const SliceParameters& parameters, int64_t qmin,
                            int64_t qmax, bool in_place) {
    auto [out, bits] = fake_quantize_cpu(x, parameters, qmin, qmax, /*with_mask=*/true, in_place);
    ctx->save_for_backward({bits});
    if (in_place) ctx->mark_dirty({x});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor bits = ctx->get_saved_variables()[0];
    // As ATen's backward (dY * mask), bitwise; nothing for the parameters, qmin, qmax and
    // the in-place flag.
    RECORD_FUNCTION("qtft::fake_quantize_backward", std::vector<c10::IValue>());
    return {memory::detail::multiply_by_bits(grad_outputs[0].contiguous(), bits, 1.0), at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

at::Tensor fake_quantize_on_cpu(at::Tensor x, const SliceParameters& parameters, int64_t qmin, int64_t qmax) {
  // Decided here, where this parameter is x's only handle if any: inside apply, autograd's
  // own list of the inputs holds x as well.
  const bool in_place = sole_owner_of_its_memory(x);
  // Without gradient (inference at batch 1 is mostly per-op overhead): no mask, and no
  // autograd function around the pass.
  if (!c10::GradMode::is_enabled()) return fake_quantize_cpu(x, parameters, qmin, qmax, false, in_place).first;
  return FakeQuantize::apply(x, parameters, qmin, qmax, in_place);
}

}  // namespace

at::Tensor fake_quantize_per_tensor(at::Tensor x, const at::Tensor& scale, const at::Tensor& zero_point, int64_t qmin,
                                    int64_t qmax) {
  if (!x.is_cpu() || x.scalar_type() != at::kFloat || !scale.is_cpu() || !zero_point.is_cpu()) {
    return at::fake_quantize_per_tensor_affine(x, scale, zero_point, qmin, qmax);
  }
  const SliceParameters parameters{
      1, x.numel(), {scale.item<float>()}, {static_cast<float>(zero_point.item<int32_t>())}};
  return fake_quantize_on_cpu(std::move(x), parameters, qmin, qmax);
}

at::Tensor fake_quantize_per_slice(at::Tensor x, int64_t dim, const std::vector<at::Tensor>& scales,
                                   const std::vector<at::Tensor>& zero_points, int64_t qmin, int64_t qmax) {
  dim = c10::maybe_wrap_dim(dim, x.dim());
  TORCH_CHECK(x.size(dim) == static_cast<int64_t>(scales.size()) && scales.size() == zero_points.size(),
              "fake_quantize_per_slice: ", scales.size(), " scales and ", zero_points.size(), " zero points for ",
              x.size(dim), " slices along dimension ", dim);
  const bool on_cpu =
      std::all_of(scales.begin(), scales.end(), [](const at::Tensor& t) { return t.is_cpu(); }) &&
      std::all_of(zero_points.begin(), zero_points.end(), [](const at::Tensor& t) { return t.is_cpu(); });
  if (!x.is_cpu() || x.scalar_type() != at::kFloat || !on_cpu) {
    // Off the CPU, LibTorch's per-tensor kernel slice by slice: its per-channel kernel is
    // not promised to round as the per-tensor one does.
    std::vector<at::Tensor> slices = x.unbind(dim);
    for (size_t i = 0; i < slices.size(); ++i) {
      slices[i] = at::fake_quantize_per_tensor_affine(slices[i], scales[i], zero_points[i], qmin, qmax);
    }
    return at::stack(slices, dim);
  }
  SliceParameters parameters{x.size(dim), 1, {}, {}};
  for (int64_t d = dim + 1; d < x.dim(); ++d) parameters.inner *= x.size(d);
  for (size_t i = 0; i < scales.size(); ++i) {
    parameters.scale.push_back(scales[i].item<float>());
    parameters.zero_point.push_back(static_cast<float>(zero_points[i].item<int32_t>()));
  }
  return fake_quantize_on_cpu(std::move(x), parameters, qmin, qmax);
}

}  // namespace qtft::quant
