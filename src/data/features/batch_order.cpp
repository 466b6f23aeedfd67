#include "qtft/data/features/batch_order.h"

#include <numeric>
#include <utility>

#include "qtft/common/detail/random.h"
#include "qtft/common/error.h"

namespace qtft::data {
namespace {

// splitmix64's finalizer: a full-avalanche 64-bit mix, the Feistel round function.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

EpochOrder::EpochOrder(size_t num_windows, uint64_t seed, bool shuffle) : size_(num_windows), shuffle_(shuffle) {
  if (!shuffle_) return;
  Rng rng(seed);
  if (size_ <= kShuffledInMemory) {
    shuffled_.resize(size_);
    std::iota(shuffled_.begin(), shuffled_.end(), uint32_t{0});
    // Fisher-Yates with our own unbiased bounded draw: std::shuffle is implementation-defined.
    for (size_t i = shuffled_.size(); i > 1; --i) std::swap(shuffled_[i - 1], shuffled_[rng.below(i)]);
    return;
  }
  int bits = 1;
  while ((uint64_t{1} << bits) < size_) ++bits;
  half_bits_ = (bits + 1) / 2;
  for (auto& key : keys_) key = rng.next_u64();
}

uint64_t EpochOrder::feistel(uint64_t x) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t left = x >> half_bits_, right = x & mask;
  for (uint64_t key : keys_) {
    const uint64_t next = left ^ (mix64(right ^ key) & mask);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

size_t EpochOrder::operator[](size_t position) const {
  if (!shuffle_) return position;
  if (!shuffled_.empty() || size_ <= kShuffledInMemory) return shuffled_[position];
  // Cycle walking: the bijection on [0, 4^half_bits) restricted to [0, size) stays a
  // bijection; the domain is under 4x the size, so a few steps on average.
  uint64_t x = position;
  do x = feistel(x);
  while (x >= size_);
  return static_cast<size_t>(x);
}

std::vector<size_t> EpochOrder::slice(size_t first, size_t end) const {
  std::vector<size_t> out;
  out.reserve(end - first);
  for (size_t i = first; i < end; ++i) out.push_back((*this)[i]);
  return out;
}

BatchOrder::BatchOrder(size_t num_windows, size_t batch_size, uint64_t seed, bool shuffle)
    : num_windows_(num_windows), batch_size_(batch_size), seed_(seed), shuffle_(shuffle) {
  if (batch_size == 0) throw UsageError("--batch-size must be at least 1");
}

size_t BatchOrder::num_batches() const { return (num_windows_ + batch_size_ - 1) / batch_size_; }

EpochOrder BatchOrder::epoch_order(int64_t epoch) const {
  return EpochOrder(num_windows_, mix_seed(seed_, static_cast<uint64_t>(epoch)), shuffle_);
}

std::vector<size_t> calibration_windows(size_t num_windows, int64_t batches, size_t batch_size, uint64_t seed) {
  std::vector<size_t> ids;
  if (num_windows == 0 || batches <= 0) return ids;
  auto order = BatchOrder(num_windows, batch_size, seed, true).epoch_order(-1);
  ids.reserve(static_cast<size_t>(batches) * batch_size);
  for (size_t i = 0; i < static_cast<size_t>(batches) * batch_size; ++i) ids.push_back(order[i % num_windows]);
  return ids;
}

}  // namespace qtft::data
