#include "qtft/common/detail/fingerprint.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "qtft/common/error.h"

namespace qtft {

std::string fnv1a64_hex(std::string_view bytes) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string file_fingerprint(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot be read to fingerprint it");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return fnv1a64_hex(bytes);
}

}  // namespace qtft
