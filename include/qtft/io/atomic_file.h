#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace qtft::io {

// A file that appears at its final path complete or not at all: writers fill temp_path()
// (a unique name in the same folder, so the rename cannot cross file systems), then
// commit() renames it into place. Destroying an uncommitted AtomicFile removes the
// temporary, so an exception or Ctrl-C mid-write never leaves a partial file behind.
// A process killed mid-write (kill -9) cannot clean up: the next AtomicFile for the same
// path removes the temporaries of writers that no longer run.
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

// Checks, before any work starts, that `path` can be written: its folder exists and is
// writable and it is not a folder itself. Throws qtft::UsageError naming `flag`, the path
// and the reason (no such folder, read-only file system, permission denied, ...).
void check_writable(const std::filesystem::path& path, const std::string& flag);

// An advisory lock (flock) on an output path for as long as a run may write it, so that
// two runs saving to the same file do not silently overwrite each other: the second one
// fails at once with a message naming the path. The lock lives in ".<name>.lock" next to
// the target, removed when released.
class OutputLock {
 public:
  explicit OutputLock(const std::filesystem::path& path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  std::filesystem::path lock_path_;
  int fd_ = -1;
};

}  // namespace qtft::io
