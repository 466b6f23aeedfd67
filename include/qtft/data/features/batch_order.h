#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qtft::data {

// One epoch's permutation of the windows. Up to kShuffledInMemory windows it is a
// Fisher-Yates shuffle held as 4 bytes a window; beyond, a keyed bijection (a Feistel
// network walked back into range) computed per position, so that a split of hundreds of
// millions of windows costs no memory at all.
class EpochOrder {
 public:
  static constexpr size_t kShuffledInMemory = size_t{1} << 22;

  EpochOrder(size_t num_windows, uint64_t seed, bool shuffle);
  size_t size() const { return size_; }
  size_t operator[](size_t position) const;
  // Positions [first, end): a batch's window indices.
  std::vector<size_t> slice(size_t first, size_t end) const;

 private:
  uint64_t feistel(uint64_t x) const;

  size_t size_;
  bool shuffle_;
  std::vector<uint32_t> shuffled_;  // the in-memory shuffle, when it is one
  int half_bits_ = 0;               // the bijection's domain is 2^(2 * half_bits_)
  uint64_t keys_[4] = {};
};

// The order in which an epoch visits windows. Each epoch's permutation depends only on
// (seed, epoch), so a resumed run continues with exactly the batches it would have seen.
class BatchOrder {
 public:
  BatchOrder(size_t num_windows, size_t batch_size, uint64_t seed, bool shuffle);

  size_t num_windows() const { return num_windows_; }
  size_t batch_size() const { return batch_size_; }
  size_t num_batches() const;  // the last batch may be smaller
  EpochOrder epoch_order(int64_t epoch) const;

 private:
  size_t num_windows_;
  size_t batch_size_;
  uint64_t seed_;
  bool shuffle_;
};

// The windows calibration visits, batch after batch: `batches` batches of `batch_size` in an
// order of their own (epoch -1 of `seed`, so calibration does not replay epoch 0's batches),
// wrapping around when it asks for more windows than the split holds. Calibration and its
// coverage report both read it, so that the report describes the batches that ran.
std::vector<size_t> calibration_windows(size_t num_windows, int64_t batches, size_t batch_size, uint64_t seed);

}  // namespace qtft::data
