#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "qtft/quant/activation_observer.h"

namespace qtft::quant {

// The observers of a group of variables as one: slice i of x along `dim` goes through
// observers[i], with the numbers of n separate calls (observers[i]->forward(slice i), or
// reapply with `observe` false), bitwise: each observer keeps its own state, scale and zero
// point and changes them as its forward would, in every mode (immediate, step, frozen,
// eval, and the record and replay of a checkpointed segment, in variable order). What is
// done once for the group: the slices' extremes are one reduction, and the fake
// quantization is one pass with a scale and zero point per slice
// (fake_quantize_per_slice), in x's own memory when nothing else holds it. Unbinding x,
// quantizing each slice into fresh memory and stacking the results back cost two copies of
// x forward and two backward: at configuration W, width 16, QAT live with checkpointing,
// grouping took the step from 2.07 to 1.84 s and its activation peak from 241 to 178 MiB
// (docs/PERFORMANCE.md, issue 35).
//
// x: float32, x.size(dim) == observers.size(). Where some observers have never observed
// (and so return their slice unchanged) and others have, the slices go one by one.
at::Tensor observe_slices(const std::vector<ActivationFakeQuantImpl*>& observers, at::Tensor x, int64_t dim,
                          bool observe = true);

}  // namespace qtft::quant
