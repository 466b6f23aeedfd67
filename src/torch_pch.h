// Precompiled for the qtft target: the LibTorch headers its sources include. Narrow ATen
// headers instead of <torch/torch.h>, which alone takes tens of seconds per file.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
