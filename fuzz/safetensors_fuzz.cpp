// libFuzzer target for the safetensors reader, the one place qtft parses bytes it did not
// write. Rejecting input with qtft::Error is the expected outcome for almost every input;
// anything else (another exception type, a sanitizer report, a broken invariant) aborts
// and becomes a crash for libFuzzer to minimize. See fuzz/README.md to build and run it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <vector>

#include "qtft/common/error.h"
#include "qtft/io/safetensors.h"

namespace {

using qtft::io::SafetensorsFile;

void check(bool condition) {
  if (!condition) std::abort();
}

// What an accepted file promises: every span lies inside the file, has the byte size its
// shape and dtype need, and writing the file again gives back the same tensors.
void check_accepted(const SafetensorsFile& file) {
  std::vector<qtft::io::TensorBytes> tensors;
  for (const auto& t : file.tensors()) {
    auto bytes = file.bytes_of(t);
    check(bytes.size() == t.numel() * qtft::io::dtype_size(t.dtype));
    tensors.push_back({t.name, t.dtype, t.shape, bytes});
  }
  auto again = SafetensorsFile::parse(qtft::io::serialize_safetensors(tensors, file.metadata()), "<round trip>");
  check(again.metadata() == file.metadata());
  check(again.tensors().size() == file.tensors().size());
  for (const auto& t : file.tensors()) {
    const auto* u = again.find(t.name);
    check(u != nullptr && u->dtype == t.dtype && u->shape == t.shape);
    auto a = file.bytes_of(t);
    auto b = again.bytes_of(*u);
    // memcmp reads every byte of both spans, so ASan also sees one that points outside.
    check(a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0));
  }
}

[[noreturn]] void abort_on(const char* what, const std::exception& e) {
  std::fprintf(stderr, "safetensors_fuzz: %s: %s\n", what, e.what());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::byte> bytes(size);
  if (size > 0) std::memcpy(bytes.data(), data, size);
  std::optional<SafetensorsFile> file;
  try {
    file.emplace(SafetensorsFile::parse(std::move(bytes), "<fuzz>"));
  } catch (const qtft::Error&) {
    return 0;  // rejected with a message: what we want for malformed input
  } catch (const std::exception& e) {
    // A library exception leaking through would reach the user without the file's name.
    abort_on("reader threw something other than qtft::Error", e);
  }
  // Once the reader accepted, nothing may throw, qtft::Error included: the writer refusing
  // what the reader accepted is a bug in one of them.
  try {
    check_accepted(*file);
  } catch (const std::exception& e) {
    abort_on("round trip of an accepted file threw", e);
  }
  return 0;
}
