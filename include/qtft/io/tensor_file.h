#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace qtft::io {

// Named tensors in a fixed order plus string metadata: the in-memory form of a model file.
struct TensorFile {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  std::map<std::string, std::string> metadata;
  const at::Tensor* find(const std::string& name) const;
};

// Saves as safetensors, atomically. Tensors on any device are copied to the CPU first;
// non-contiguous ones are made contiguous. The bytes are exactly the tensor's bytes.
void save_tensor_file(const std::filesystem::path& path, const TensorFile& file);

// Loads every tensor as an owning CPU tensor with the file's dtype and shape.
TensorFile load_tensor_file(const std::filesystem::path& path);

}  // namespace qtft::io
