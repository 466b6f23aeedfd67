// Precompiled for the targets that use LibTorch: the headers their sources include.
// Narrow headers instead of <torch/torch.h>, which alone takes tens of seconds per file.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/rnn.h>
#include <torch/optim/adam.h>
