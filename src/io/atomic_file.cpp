#include "qtft/io/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

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

// Temporaries ".<name>.tmp-<pid>-<n>" of `final_path` whose writer process is gone.
void remove_stale_temporaries(const std::filesystem::path& final_path) {
  const auto folder = final_path.parent_path().empty() ? std::filesystem::path(".") : final_path.parent_path();
  std::string prefix(1, '.');  // appended, not "." + name: GCC 12 warns falsely (-Wrestrict)
  prefix.append(final_path.filename().string()).append(".tmp-");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const auto dash = rest.find('-');
    if (dash == std::string::npos) continue;
    char* end = nullptr;
    const long pid = std::strtol(rest.c_str(), &end, 10);
    if (end != rest.c_str() + dash || pid <= 0) continue;
    // kill(pid, 0) fails with ESRCH only when no such process exists.
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      std::filesystem::remove(entry.path(), ignored);
    }
  }
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
    throw Error(final_path_.string() + ": cannot write, folder '" + folder.string() + "' does not exist");
  }
  remove_stale_temporaries(final_path_);
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
    throw Error(final_path_.string() + ": cannot move the finished file into place: " + ec.message());
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

void check_writable(const std::filesystem::path& path, const std::string& flag) {
  const std::string where = flag.empty() ? path.string() : flag + " " + path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw UsageError(where + ": is a folder, not a file name");
  const auto folder = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  if (!std::filesystem::is_directory(folder, ec)) {
    throw UsageError(where + ": the folder '" + folder.string() + "' does not exist");
  }
  // The file is written as a temporary in the folder and renamed: the folder must be writable.
  if (::access(folder.c_str(), W_OK) != 0) {
    throw UsageError(where + ": cannot write into '" + folder.string() + "': " + std::strerror(errno));
  }
}

namespace {

std::filesystem::path lock_path_for(const std::filesystem::path& path) {
  std::string name(1, '.');  // appended, not "." + name: GCC 12 warns falsely (-Wrestrict)
  name.append(path.filename().string()).append(".lock");
  return (path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path()) / name;
}

}  // namespace

OutputLock::OutputLock(const std::filesystem::path& path) : lock_path_(lock_path_for(path)) {
  fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(path.string() + ": cannot create the lock " + lock_path_.string() + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw Error(path.string() + ": another qtft run is writing this file (lock " + lock_path_.string() +
                  "); wait for it to finish or choose another path");
    }
    throw Error(path.string() + ": cannot lock " + lock_path_.string() + ": " + std::strerror(err));
  }
}

OutputLock::~OutputLock() {
  if (fd_ < 0) return;
  std::error_code ignored;
  std::filesystem::remove(lock_path_, ignored);
  ::close(fd_);  // releases the lock
}

}  // namespace qtft::io
