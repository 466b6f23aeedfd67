// Batches: seeded order, and tensors that hold exactly the dataset's rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "qtft/common/error.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/batch_order.h"
#include "support/bar_files.h"

namespace qtft::data {
namespace {

std::vector<size_t> whole(const EpochOrder& order) { return order.slice(0, order.size()); }

TEST(BatchOrder, SameSeedSameOrderAndEveryWindowOnce) {
  BatchOrder a(1000, 64, 42, true), b(1000, 64, 42, true), c(1000, 64, 43, true);
  auto order = whole(a.epoch_order(0));
  EXPECT_EQ(order, whole(b.epoch_order(0)));
  EXPECT_NE(order, whole(c.epoch_order(0)));
  EXPECT_NE(order, whole(a.epoch_order(1)));  // a new permutation each epoch
  auto sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> all(1000);
  std::iota(all.begin(), all.end(), size_t{0});
  EXPECT_EQ(sorted, all);
  EXPECT_EQ(a.num_batches(), 16u);  // 15 full batches and one of 40
}

TEST(BatchOrder, PinnedOrderForSeed) {
  // Fisher-Yates over qtft::Rng is fully specified: this order must never change silently,
  // or resumed runs and published results would stop reproducing.
  BatchOrder order(8, 4, 42, true);
  EXPECT_EQ(whole(order.epoch_order(0)), (std::vector<size_t>{1, 7, 3, 5, 6, 4, 2, 0}));
}

TEST(BatchOrder, BeyondTheInMemoryShuffleEveryWindowComesOnceWithoutAList) {
  // Past kShuffledInMemory windows the order is computed per position: still a permutation,
  // seeded per epoch, and no longer the identity.
  const size_t n = EpochOrder::kShuffledInMemory + 12345;
  BatchOrder order(n, 64, 42, true);
  const auto epoch = order.epoch_order(0);
  std::vector<bool> seen(n, false);
  size_t in_place = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t w = epoch[i];
    ASSERT_LT(w, n);
    ASSERT_FALSE(seen[w]) << "window " << w << " twice";
    seen[w] = true;
    in_place += w == i;
  }
  EXPECT_LT(in_place, 100u);
  EXPECT_NE(epoch.slice(0, 8), order.epoch_order(1).slice(0, 8));
  EXPECT_EQ(epoch.slice(0, 8), BatchOrder(n, 64, 42, true).epoch_order(0).slice(0, 8));
}

TEST(BatchOrder, UnshuffledIsInOrder) {
  BatchOrder order(5, 2, 42, false);
  EXPECT_EQ(whole(order.epoch_order(3)), (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(order.num_batches(), 3u);
}

TEST(Batch, HoldsTheWindowsRowsExactly) {
  auto bars = test::regular_bar_set(201, 2);
  DatasetOptions o;
  o.encoder_length = 8;
  o.horizon = 3;
  auto d = Dataset::build(bars, o);
  std::vector<size_t> indices{5, 0, d.num_windows(Split::Train) - 1};
  auto batch = make_batch(d, Split::Train, indices);
  EXPECT_EQ(batch.observed.sizes(), (std::vector<int64_t>{3, 8, 5}));
  EXPECT_EQ(batch.known.sizes(), (std::vector<int64_t>{3, 11, 4}));
  EXPECT_EQ(batch.target.sizes(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(batch.symbol.sizes(), (std::vector<int64_t>{3}));
  for (int64_t i = 0; i < 3; ++i) {
    auto w = d.window(Split::Train, indices[i]);
    const auto& s = d.series()[w.series];
    EXPECT_EQ(batch.symbol[i].item<int64_t>(), s.symbol_id);
    for (int64_t t = 0; t < 8; ++t) {
      for (int64_t j = 0; j < 5; ++j) {
        ASSERT_EQ(batch.observed[i][t][j].item<float>(), s.observed[(w.start + t) * 5 + j]);
      }
    }
    for (int64_t t = 0; t < 11; ++t) {
      ASSERT_EQ(batch.known[i][t][3].item<float>(), s.known[(w.start + t) * 4 + 3]);
    }
    // The decoder targets are the rows after the encoder, never the encoder's own rows.
    for (int64_t h = 0; h < 3; ++h) {
      ASSERT_EQ(batch.target[i][h].item<float>(), s.target[w.start + 8 + h]);
    }
  }
  EXPECT_EQ(batch.symbol[2].item<int64_t>(), 1);  // the last window is the second symbol's
}

// A forecast's window in the same layout: the decoder's known rows come after the encoder's
// from elsewhere (the future timestamps), and there is no target.
TEST(Batch, AForecastsWindowTakesItsDecoderRowsFromAhead) {
  const BatchShape shape{1, 2, 1, 1, 2, 0, /*with_target=*/false};
  Batch batch = empty_batch(shape);
  EXPECT_FALSE(batch.target.defined());
  const std::vector<float> observed{1, 2}, known{10, 11, 20, 21}, ahead{30, 31};
  WindowRows rows;
  rows.observed = observed;
  rows.known = known;
  rows.known_ahead = ahead;
  rows.symbol_id = 4;
  fill_window(batch, shape, 0, rows);
  const float* k = batch.known.data_ptr<float>();
  EXPECT_EQ(std::vector<float>(k, k + 6), (std::vector<float>{10, 11, 20, 21, 30, 31}));
  EXPECT_EQ(batch.symbol[0].item<int64_t>(), 4);
  rows.known_ahead = {};
  EXPECT_THROW(
      {
        try {
          fill_window(batch, shape, 0, rows);
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "batch window 0: known holds 4 values, the batch's shape needs 6");
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace qtft::data
