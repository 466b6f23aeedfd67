#pragma once

// The feature store's file, shared by building it (store_build.cpp) and mapping it
// (feature_store.cpp): the layout's constants and the writer of its aligned arrays.
//   [head magic][arrays, each 64-byte aligned][index JSON][data bytes][index size][tail magic]
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>

#include "qtft/common/error.h"
#include "qtft/data/store/feature_store.h"

namespace qtft::data {

inline constexpr char kHeadMagic[8] = {'Q', 'T', 'F', 'S', 'T', 'O', 'R', '1'};
inline constexpr char kTailMagic[8] = {'Q', 'T', 'F', 'S', 'E', 'N', 'D', '1'};
inline constexpr size_t kAlign = 64;
inline constexpr size_t kFooterBytes = 24;
inline constexpr uint64_t kMaxIndexBytes = uint64_t{256} << 20;
// 2: the calendar's terms follow the bars' spacing (a store of daily bars built before
// holds time of day). 3: the index names the splits, not the windows (one store serves
// every encoder length and horizon).
inline constexpr int kFormatVersion = 3;
inline constexpr const char* kExtension = ".qtfs";

// What of the dataset options a store is built for: the splits, which decide the training
// rows the inputs' statistics are fitted on. The windows are the mapper's.
inline nlohmann::json splits_json(const DatasetOptions& options) {
  return {{"validation_fraction", options.validation_fraction}, {"test_fraction", options.test_fraction}};
}

// Appends arrays to a file, each at an aligned offset; errors (a full disk) name the file.
class ArrayWriter {
 public:
  ArrayWriter(const std::filesystem::path& path, const std::string& shown) : shown_(shown) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) fail("cannot create");
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  }
  ~ArrayWriter() {
    if (file_) std::fclose(file_);
  }
  ArrayWriter(const ArrayWriter&) = delete;
  ArrayWriter& operator=(const ArrayWriter&) = delete;

  template <class T>
  uint64_t append(std::span<const T> values) {
    pad();
    const uint64_t at = offset_;
    write(values.data(), values.size_bytes());
    return at;
  }
  void write(const void* data, size_t bytes) {
    if (bytes > 0 && std::fwrite(data, 1, bytes, file_) != bytes) fail("cannot write");
    offset_ += bytes;
  }
  void pad() {
    static constexpr char zeros[kAlign] = {};
    write(zeros, (kAlign - offset_ % kAlign) % kAlign);
  }
  uint64_t offset() const { return offset_; }
  // Room for an array of `bytes`, aligned as append() aligns, to be filled by write_at():
  // a long series' features are computed part by part, each part filling its rows.
  uint64_t reserve(uint64_t bytes) {
    pad();
    const uint64_t at = offset_;
    offset_ += bytes;
    if (std::fseek(file_, static_cast<long>(offset_), SEEK_SET) != 0) fail("cannot write");
    return at;
  }
  template <class T>
  void write_at(uint64_t at, std::span<const T> values) {
    if (std::fflush(file_) != 0) fail("cannot write");
    const auto* from = reinterpret_cast<const char*>(values.data());
    for (size_t done = 0, bytes = values.size_bytes(); done < bytes;) {
      const ssize_t n = ::pwrite(fileno(file_), from + done, bytes - done, static_cast<off_t>(at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("cannot write");
      done += static_cast<size_t>(n);
    }
  }
  void close() {
    const bool ok = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
    const int err = errno;
    std::fclose(file_);
    file_ = nullptr;
    if (!ok) {
      errno = err;
      fail("cannot write");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    const std::string reason = std::strerror(errno);
    throw Error(shown_ + ": " + what + " the feature store: " + reason);
  }
  std::string shown_;
  std::FILE* file_ = nullptr;
  uint64_t offset_ = 0;
};

// `bytes` bytes of `fd` at `offset` into `to`; a failure is an Error starting with `what`.
void read_fully(int fd, uint64_t offset, size_t bytes, void* to, const std::string& what);

// Builds the store of `source` under `options` (fitted, or under a saved spec) at `path`,
// named by the fingerprint `fp`, featurizing each series `part_rows` rows at a time.
StorePreparation build_store(const BarSource& source, const DatasetOptions& options, const InputSchema* saved,
                             const nlohmann::json& fp, const std::filesystem::path& path, uint64_t part_rows);

}  // namespace qtft::data
