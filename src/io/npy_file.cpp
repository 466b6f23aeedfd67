#include "qtft/io/npy_file.h"

#include <bit>
#include <string>

#include "qtft/common/error.h"
#include "qtft/io/atomic_file.h"

namespace qtft::io {
namespace {

// NumPy's type string for a dtype: byte order, kind, item size.
const char* npy_descr(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "<f4";
    case at::kDouble: return "<f8";
    case at::kLong: return "<i8";
    case at::kInt: return "<i4";
    case at::kChar: return "|i1";
    case at::kByte: return "|u1";
    case at::kBool: return "|b1";
    default: return nullptr;
  }
}

}  // namespace

void save_npy(const std::filesystem::path& path, const at::Tensor& tensor) {
  static_assert(std::endian::native == std::endian::little, "the .npy files are written little-endian");
  const char* descr = npy_descr(tensor.scalar_type());
  if (descr == nullptr) {
    throw Error(path.string() + ": cannot write a tensor of " + std::string(c10::toString(tensor.scalar_type())) +
                " as .npy");
  }
  const at::Tensor values = tensor.cpu().contiguous();
  // Python's tuple: (2, 3), (2,) for one dimension, () for none.
  std::string shape;
  for (int64_t size : values.sizes()) shape += (shape.empty() ? "" : ", ") + std::to_string(size);
  if (values.dim() == 1) shape += ",";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" + shape + "), }";
  // The magic, the version, a 2-byte header length, then the header padded with spaces and
  // ended by a newline so that the values start at a multiple of 64 bytes.
  constexpr size_t kPrefix = 10, kAlignment = 64;
  const size_t unpadded = kPrefix + header.size() + 1;
  header.append((kAlignment - unpadded % kAlignment) % kAlignment, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(header.size() & 0xFF);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char*>(values.const_data_ptr()), values.nbytes());
  write_file_atomically(path, bytes);
}

}  // namespace qtft::io
