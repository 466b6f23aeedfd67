#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace qtft {

// FNV-1a, 64 bits, as 16 hex digits: a name for some bytes, not a defence against forgery.
std::string fnv1a64_hex(std::string_view bytes);
// The same over a file's bytes; throws qtft::Error naming the file when it cannot be read.
std::string file_fingerprint(const std::filesystem::path& path);

}  // namespace qtft
