#include "qtft/io/tensor_diff.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>

namespace qtft::io {
namespace {

std::string dtype_text(at::ScalarType t) {
  switch (t) {
    case at::kDouble: return "F64";
    case at::kFloat: return "F32";
    case at::kHalf: return "F16";
    case at::kBFloat16: return "BF16";
    case at::kLong: return "I64";
    case at::kInt: return "I32";
    case at::kShort: return "I16";
    case at::kChar: return "I8";
    case at::kByte: return "U8";
    case at::kBool: return "BOOL";
    default: return c10::toString(t);
  }
}

bool is_exact(at::ScalarType t) { return at::isIntegralType(t, /*includeBool=*/true); }

// Integers differ by an exact count: |a - b| in unsigned arithmetic cannot overflow, and
// the double it becomes is exact up to 2^53, far beyond any weight or index we store.
void compare_integers(const at::Tensor& a, const at::Tensor& b, TensorDiffRow& row) {
  auto x = a.to(at::kLong).contiguous(), y = b.to(at::kLong).contiguous();
  const int64_t* xp = x.data_ptr<int64_t>();
  const int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (xp[i] == yp[i]) continue;
    ++row.differing_elements;
    const uint64_t d = xp[i] > yp[i] ? static_cast<uint64_t>(xp[i]) - static_cast<uint64_t>(yp[i])
                                     : static_cast<uint64_t>(yp[i]) - static_cast<uint64_t>(xp[i]);
    if (static_cast<double>(d) > row.max_abs_diff) {
      row.max_abs_diff = static_cast<double>(d);
      row.max_diff_index = i;
    }
  }
}

// Every float dtype we store converts to double exactly, so the difference is computed
// once, in double, whatever the two dtypes are.
void compare_floats(const at::Tensor& a, const at::Tensor& b, TensorDiffRow& row) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  auto x = a.to(at::kDouble).contiguous(), y = b.to(at::kDouble).contiguous();
  const double* xp = x.data_ptr<double>();
  const double* yp = y.data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double u = xp[i], v = yp[i];
    if (u == v || (std::isnan(u) && std::isnan(v))) continue;
    ++row.differing_elements;
    const double d = (std::isnan(u) || std::isnan(v)) ? kInf : std::abs(u - v);
    if (d > row.max_abs_diff || row.max_diff_index < 0) {
      row.max_abs_diff = d;
      row.max_diff_index = i;
    }
  }
}

TensorDiffRow compare(const std::string& name, const at::Tensor* a, const at::Tensor* b) {
  TensorDiffRow row;
  row.name = name;
  row.in_a = a != nullptr;
  row.in_b = b != nullptr;
  if (a) {
    row.dtype_a = dtype_text(a->scalar_type());
    row.shape_a = a->sizes().vec();
  }
  if (b) {
    row.dtype_b = dtype_text(b->scalar_type());
    row.shape_b = b->sizes().vec();
  }
  if (!a || !b) {
    row.max_abs_diff = std::numeric_limits<double>::quiet_NaN();
    row.differing_elements = -1;
    return row;
  }
  row.same_dtype = a->scalar_type() == b->scalar_type();
  row.same_shape = a->sizes() == b->sizes();
  if (!row.same_shape) {
    row.max_abs_diff = std::numeric_limits<double>::quiet_NaN();
    row.differing_elements = -1;
    return row;
  }
  if (is_exact(a->scalar_type()) && is_exact(b->scalar_type())) {
    compare_integers(*a, *b, row);
  } else {
    compare_floats(*a, *b, row);
  }
  // Bytes decide identity: values can agree while bytes differ (-0.0 against 0.0, NaN payloads).
  if (row.same_dtype) {
    auto x = a->contiguous(), y = b->contiguous();
    row.bitwise_identical =
        x.nbytes() == y.nbytes() && (x.nbytes() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
  }
  return row;
}

// Names looked up through a map: TensorFile::find is linear, and models hold thousands.
std::map<std::string, const at::Tensor*> by_name(const TensorFile& file) {
  std::map<std::string, const at::Tensor*> out;
  for (const auto& [name, tensor] : file.tensors) out.emplace(name, &tensor);
  return out;
}

}  // namespace

bool TensorFileDiff::identical() const { return only_in_a.empty() && only_in_b.empty() && differing_tensors() == 0; }

size_t TensorFileDiff::differing_tensors() const {
  size_t n = 0;
  for (const auto& row : rows) n += row.bitwise_identical ? 0 : 1;
  return n;
}

TensorFileDiff diff_tensor_files(const TensorFile& a, const TensorFile& b) {
  const auto in_a = by_name(a), in_b = by_name(b);
  TensorFileDiff diff;
  for (const auto& [name, tensor] : a.tensors) {
    auto other = in_b.find(name);
    diff.rows.push_back(compare(name, &tensor, other == in_b.end() ? nullptr : other->second));
    if (other == in_b.end()) diff.only_in_a.push_back(name);
  }
  for (const auto& [name, tensor] : b.tensors) {
    if (in_a.count(name)) continue;
    diff.rows.push_back(compare(name, nullptr, &tensor));
    diff.only_in_b.push_back(name);
  }
  std::set<std::string> keys;
  for (const auto& [key, value] : a.metadata) keys.insert(key);
  for (const auto& [key, value] : b.metadata) keys.insert(key);
  for (const auto& key : keys) {
    auto x = a.metadata.find(key), y = b.metadata.find(key);
    if (x == a.metadata.end() || y == b.metadata.end() || x->second != y->second) {
      diff.metadata_differences.push_back(key);
    }
  }
  return diff;
}

TensorFileDiff diff_tensor_files(const std::filesystem::path& a, const std::filesystem::path& b) {
  return diff_tensor_files(load_tensor_file(a), load_tensor_file(b));
}

}  // namespace qtft::io
