#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace qtft::quant {

// Per-tensor affine fake quantization with the straight-through gradient (the gradient is
// passed where the rounded value fell inside [qmin, qmax], zero elsewhere): bitwise what
// at::fake_quantize_per_tensor_affine(x, scale, zero_point, qmin, qmax) gives for finite x,
// tested against it.
//
// Why not that kernel itself: on the CPU it runs scalar code, about 7 ns per element on two
// threads, and was the largest single cost of a QAT training step (18% of it, 25% with
// checkpointing, docs/PERFORMANCE.md). Here the same arithmetic runs in one pass over x that
// the compiler vectorizes, writing the output and the gradient's mask together (it was seven
// of ATen's elementwise ops, each a pass of its own). The mask is kept as one bit per
// element (memory/detail/bit_mask.h), which the backward's product reads directly: a bool
// mask took an eighth of the activation's memory again, and at::mul(grad, mask) first
// copied it into a float tensor (docs/PERFORMANCE.md, issue 25's third step). Off the CPU
// it is LibTorch's fused kernel.
//
// x is taken by value. On the CPU, an x that nothing else reaches (a temporary, or a tensor
// moved in, contiguous, covering all of its storage, not a leaf that requires gradient)
// gets the result in its own memory, and the result is that tensor. A fresh output of the
// activation's size per observer was the larger cost of a big step: its pages are new.
// An x the caller still holds is left as it was.
//
// scale: float [1], zero_point: int32 [1], on x's device (read there: no synchronization
// off the CPU).
at::Tensor fake_quantize_per_tensor(at::Tensor x, const at::Tensor& scale, const at::Tensor& zero_point, int64_t qmin,
                                    int64_t qmax);

// x's slices along `dim` fake-quantized each with its own parameters, in one pass:
// slice i bitwise what fake_quantize_per_tensor(slice i, scales[i], zero_points[i]) gives,
// with the same straight-through gradient and the same use of x's memory. Off the CPU, the
// slices through LibTorch's per-tensor kernel one by one. scales: float [1] each,
// zero_points: int32 [1] each, one per slice.
at::Tensor fake_quantize_per_slice(at::Tensor x, int64_t dim, const std::vector<at::Tensor>& scales,
                                   const std::vector<at::Tensor>& zero_points, int64_t qmin, int64_t qmax);

}  // namespace qtft::quant
