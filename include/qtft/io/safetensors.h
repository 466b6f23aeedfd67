#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qtft::io {

// The element types of the Hugging Face safetensors format that qtft reads and writes.
enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // as spelled in the header: "F32", "BF16", ...
std::optional<DType> parse_dtype(std::string_view name);

// Where one tensor lives in the data buffer; offsets are relative to its start.
struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t numel() const;
};

// Limits on untrusted input, so a hostile header cannot make us allocate or recurse.
inline constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

// A parsed, fully validated safetensors file held in memory. Every structural rule of the
// format is checked before a tensor is handed out: header length within the file and the
// cap, valid JSON, known dtypes, shapes whose byte size matches the offsets, offsets that
// tile the data buffer exactly (no overlap, no hole, no trailing bytes), unique names.
class SafetensorsFile {
 public:
  static SafetensorsFile read(const std::filesystem::path& path);
  // `source` names the bytes in error messages (a path, or "<memory>").
  static SafetensorsFile parse(std::vector<std::byte> bytes, const std::string& source);

  // In data-buffer order.
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* find(std::string_view name) const;
  const TensorEntry& at(std::string_view name) const;  // throws naming the file
  std::span<const std::byte> bytes_of(const TensorEntry& entry) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::byte> file_bytes_;
  size_t data_start_ = 0;
  std::vector<TensorEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: its bytes are little-endian, row-major, exactly numel * dtype size.
struct TensorBytes {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
};

// The whole file as bytes: tensors in the given order, header padded to 8 bytes.
std::vector<std::byte> serialize_safetensors(const std::vector<TensorBytes>& tensors,
                                             const std::map<std::string, std::string>& metadata);

// Serializes and writes atomically (temporary file in the same folder, then rename).
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorBytes>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace qtft::io
