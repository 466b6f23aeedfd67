#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "qtft/io/tensor_file.h"

namespace qtft::io {

// How one named tensor compares between file A and file B.
struct TensorDiffRow {
  std::string name;
  bool in_a = false;
  bool in_b = false;
  std::string dtype_a, dtype_b;  // safetensors spelling ("F32"); empty when absent
  std::vector<int64_t> shape_a, shape_b;
  bool same_dtype = false;
  bool same_shape = false;
  // Largest |a - b| over elements, compared as values: across dtypes too when the shapes
  // agree (F32 against F64 after a conversion), exactly for integer and bool tensors. Two
  // NaNs count as equal; a NaN against a number counts as infinitely far. NaN when the
  // values cannot be compared (missing tensor, different shapes).
  double max_abs_diff = 0.0;
  int64_t differing_elements = 0;  // elements whose values differ; -1 when not comparable
  int64_t max_diff_index = -1;     // flat row-major index of the largest difference, -1 if none
  bool bitwise_identical = false;  // same dtype, same shape, same bytes
};

// The tensor-by-tensor comparison of two safetensors files.
struct TensorFileDiff {
  std::vector<TensorDiffRow> rows;  // A's tensors in A's order, then those only in B
  std::vector<std::string> only_in_a, only_in_b;
  // Metadata keys present in only one file or with different values. Metadata describes a
  // file (creation time, a note, the command line), so it is reported but does not make
  // the files different: identical() is about the tensors alone.
  std::vector<std::string> metadata_differences;

  // The same tensor names, and every tensor with the same dtype, shape and bytes.
  bool identical() const;
  size_t differing_tensors() const;  // rows that are not bitwise identical
};

TensorFileDiff diff_tensor_files(const TensorFile& a, const TensorFile& b);
// Loads both files (errors name the file at fault), then compares.
TensorFileDiff diff_tensor_files(const std::filesystem::path& a, const std::filesystem::path& b);

}  // namespace qtft::io
