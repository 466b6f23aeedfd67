#include "qtft/data/batch_order.h"

#include <numeric>
#include <utility>

#include "qtft/common/error.h"
#include "qtft/common/random.h"

namespace qtft::data {

BatchOrder::BatchOrder(size_t num_windows, size_t batch_size, uint64_t seed, bool shuffle)
    : num_windows_(num_windows), batch_size_(batch_size), seed_(seed), shuffle_(shuffle) {
  if (batch_size == 0) throw UsageError("--batch-size must be at least 1");
}

size_t BatchOrder::num_batches() const { return (num_windows_ + batch_size_ - 1) / batch_size_; }

std::vector<size_t> BatchOrder::epoch_order(int64_t epoch) const {
  std::vector<size_t> order(num_windows_);
  std::iota(order.begin(), order.end(), size_t{0});
  if (!shuffle_) return order;
  Rng rng(mix_seed(seed_, static_cast<uint64_t>(epoch)));
  // Fisher-Yates with our own unbiased bounded draw: std::shuffle is implementation-defined.
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[rng.below(i)]);
  }
  return order;
}

}  // namespace qtft::data
