#include "qtft/io/tensor_file.h"

#include <ATen/ops/empty.h>

#include <cstring>

#include "qtft/common/error.h"
#include "qtft/io/safetensors.h"

namespace qtft::io {
namespace {

DType to_dtype(at::ScalarType t, const std::string& name) {
  switch (t) {
    case at::kDouble: return DType::F64;
    case at::kFloat: return DType::F32;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kLong: return DType::I64;
    case at::kInt: return DType::I32;
    case at::kShort: return DType::I16;
    case at::kChar: return DType::I8;
    case at::kByte: return DType::U8;
    case at::kBool: return DType::BOOL;
    default:
      throw Error("cannot save tensor '" + name + "': dtype " + std::string(c10::toString(t)) +
                  " has no safetensors equivalent");
  }
}

at::ScalarType to_scalar_type(DType t) {
  switch (t) {
    case DType::F64: return at::kDouble;
    case DType::F32: return at::kFloat;
    case DType::F16: return at::kHalf;
    case DType::BF16: return at::kBFloat16;
    case DType::I64: return at::kLong;
    case DType::I32: return at::kInt;
    case DType::I16: return at::kShort;
    case DType::I8: return at::kChar;
    case DType::U8: return at::kByte;
    case DType::BOOL: return at::kBool;
  }
  return at::kFloat;
}

}  // namespace

const at::Tensor* TensorFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors) {
    if (n == name) return &t;
  }
  return nullptr;
}

void save_tensor_file(const std::filesystem::path& path, const TensorFile& file) {
  // Keep the CPU copies alive until serialization has read them. x86-64 and aarch64 are
  // little-endian, as the format requires, so the bytes go out as they are.
  std::vector<at::Tensor> cpu;
  std::vector<TensorBytes> entries;
  cpu.reserve(file.tensors.size());
  for (const auto& [name, tensor] : file.tensors) {
    cpu.push_back(tensor.detach().to(at::kCPU).contiguous());
    const auto& t = cpu.back();
    auto bytes = std::span<const std::byte>(static_cast<const std::byte*>(t.data_ptr()), t.nbytes());
    entries.push_back({name, to_dtype(t.scalar_type(), name), t.sizes().vec(), bytes});
  }
  write_safetensors(path, entries, file.metadata);
}

TensorFile load_tensor_file(const std::filesystem::path& path) {
  auto st = SafetensorsFile::read(path);
  TensorFile out;
  out.metadata = st.metadata();
  for (const auto& entry : st.tensors()) {
    auto t = at::empty(entry.shape, at::TensorOptions().dtype(to_scalar_type(entry.dtype)));
    auto bytes = st.bytes_of(entry);
    if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
    out.tensors.emplace_back(entry.name, std::move(t));
  }
  return out;
}

}  // namespace qtft::io
