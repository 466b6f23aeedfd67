#include "qtft/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "qtft/common/error.h"

namespace qtft::io {
namespace {

std::filesystem::path make_temp_path(const std::filesystem::path& final_path) {
  static std::atomic<unsigned> counter{0};
  // Appending (not "." + string) sidesteps a GCC 12 -Wrestrict false positive.
  std::string name(1, '.');
  name.append(final_path.filename().string()).append(".tmp-").append(std::to_string(::getpid()));
  name.append("-").append(std::to_string(counter++));
  return final_path.parent_path() / name;
}

void fsync_path(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path final_path)
    : final_path_(std::move(final_path)), temp_path_(make_temp_path(final_path_)) {
  auto folder = final_path_.parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder)) {
    throw Error(final_path_.string() + ": cannot write, folder '" + folder.string() +
                "' does not exist");
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    std::error_code ignored;
    std::filesystem::remove(temp_path_, ignored);
  }
}

void AtomicFile::commit() {
  fsync_path(temp_path_);
  std::error_code ec;
  std::filesystem::rename(temp_path_, final_path_, ec);
  if (ec) {
    throw Error(final_path_.string() + ": cannot move the finished file into place: " +
                ec.message());
  }
  committed_ = true;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFile file(path);
  int fd = ::open(file.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    throw Error(path.string() + ": cannot create: " + std::strerror(errno));
  }
  const char* data = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, data, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw Error(path.string() + ": write failed: " + std::strerror(err));
    }
    data += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    throw Error(path.string() + ": write failed: " + std::strerror(errno));
  }
  file.commit();
}

}  // namespace qtft::io
