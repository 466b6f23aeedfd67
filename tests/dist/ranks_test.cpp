// dist::Ranks alone: a world of one does what a single process does, with no collective.
#include <gtest/gtest.h>

#include <torch/nn/modules/linear.h>

#include "qtft/dist/ranks.h"

namespace qtft::dist {
namespace {

TEST(Ranks, AWorldOfOneTakesEveryBatchWholeAndNeedsNoCollective) {
  const Ranks alone;
  EXPECT_EQ(alone.count(), 1);
  EXPECT_EQ(alone.rank(), 0);
  EXPECT_TRUE(alone.leader());
  // 10 windows at 4 a step: 3 steps, the last of 2 windows (across ranks it would be left out).
  EXPECT_EQ(alone.steps_per_epoch(10, 4), 3u);
  EXPECT_EQ(alone.share_of_step(0, 10, 4), (std::pair<size_t, size_t>{0, 4}));
  EXPECT_EQ(alone.share_of_step(2, 10, 4), (std::pair<size_t, size_t>{8, 10}));
  EXPECT_EQ(alone.steps_per_epoch(0, 4), 0u);
  torch::nn::Linear layer(1, 1);
  EXPECT_FALSE(alone.gradient_averaging(*layer));
  // A step's end alone: the loss and stop request as they were, and no collective.
  const auto outcome = alone.end_step(*layer, 1.25, true);
  EXPECT_EQ(outcome.mean_loss, 1.25);
  EXPECT_TRUE(outcome.stop);
  EXPECT_EQ(alone.collectives(), 0);
  int polls = 0;
  const auto stop = alone.stop_on_any_rank([&] { return ++polls == 2; });
  EXPECT_FALSE(stop());
  EXPECT_TRUE(stop());
  alone.barrier();  // returns at once
  EXPECT_EQ(Ranks(nullptr).count(), 1);
}

}  // namespace
}  // namespace qtft::dist
