#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace qtft::io {

// A file mapped read-only into memory, unmapped when destroyed. Its pages belong to the
// page cache, not to the process: processes that map one file share one copy, and the
// kernel drops pages under pressure instead of swapping them.
class MappedFile {
 public:
  // How the mapping will be read. Random: batches gathered from anywhere in the file; the
  // kernel then neither reads ahead nor maps neighbouring pages on a fault, so a process's
  // resident set holds the pages it used, not their surroundings.
  enum class Access { Sequential, Random };
  explicit MappedFile(const std::filesystem::path& path, Access access = Access::Sequential);  // throws qtft::Error
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace qtft::io
