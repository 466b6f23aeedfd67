#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace qtft::data {

// The order in which an epoch visits windows. Each epoch's permutation depends only on
// (seed, epoch), so a resumed run continues with exactly the batches it would have seen.
class BatchOrder {
 public:
  BatchOrder(size_t num_windows, size_t batch_size, uint64_t seed, bool shuffle);

  size_t num_windows() const { return num_windows_; }
  size_t batch_size() const { return batch_size_; }
  size_t num_batches() const;  // the last batch may be smaller
  std::vector<size_t> epoch_order(int64_t epoch) const;

 private:
  size_t num_windows_;
  size_t batch_size_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace qtft::data
