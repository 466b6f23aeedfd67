#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>

namespace qtft::io {

// Writes `tensor` (float32, float64, int64, int32, int8, uint8 or bool; any shape, on the
// CPU) as a NumPy .npy file, format 1.0, little-endian and C order, atomically: what
// numpy.load reads back as the same array. The format is a short text header and the raw
// values; NumPy's own specification is numpy/lib/format.py. Throws qtft::Error naming the
// path for another dtype.
void save_npy(const std::filesystem::path& path, const at::Tensor& tensor);

}  // namespace qtft::io
