#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace qtft::io {

// A file that appears at its final path complete or not at all: writers fill temp_path()
// (a unique name in the same folder, so the rename cannot cross file systems), then
// commit() renames it into place. Destroying an uncommitted AtomicFile removes the
// temporary, so an exception or Ctrl-C mid-write never leaves a partial file behind.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path final_path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::filesystem::path& temp_path() const { return temp_path_; }
  const std::filesystem::path& final_path() const { return final_path_; }
  void commit();

 private:
  std::filesystem::path final_path_;
  std::filesystem::path temp_path_;
  bool committed_ = false;
};

// Writes bytes to path atomically (temporary file, fsync, rename).
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes);

}  // namespace qtft::io
