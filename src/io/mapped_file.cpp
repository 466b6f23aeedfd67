#include "qtft/io/detail/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "qtft/common/error.h"

namespace qtft::io {

MappedFile::MappedFile(const std::filesystem::path& path, Access access) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path.string() + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(path.string() + ": cannot stat: " + std::strerror(err));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      throw Error(path.string() + ": cannot map into memory: " + std::strerror(err));
    }
    data_ = static_cast<const std::byte*>(p);
    // Advice only: a kernel that ignores it reads the same bytes.
    ::madvise(p, size_, access == Access::Random ? MADV_RANDOM : MADV_SEQUENTIAL);
  }
  ::close(fd);  // the mapping keeps the file open
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace qtft::io
