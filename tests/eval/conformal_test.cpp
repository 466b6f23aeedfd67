// The conformal arithmetic against values computed by hand.
#include "qtft/eval/conformal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "qtft/common/error.h"

namespace qtft::eval {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SplitConformal, TheOffsetIsTheFiniteSampleQuantileOfTheResiduals) {
  // 4 windows, 1 step, levels 0.1, 0.5, 0.9; the forecasts are 0 for every level, so the
  // residuals are the outcomes: sorted -0.1, 0, 0.2, 0.3.
  const std::vector<double> outcomes{0.3, -0.1, 0.2, 0.0};
  const std::vector<double> forecasts(12, 0.0);
  const auto fitted = fit_split_conformal(forecasts, outcomes, 1, {0.1, 0.5, 0.9});
  // Ranks ceil(5 q): 1, 3 and 5, clamped to 4.
  EXPECT_THAT(fitted.offsets, ElementsAre(-0.1, 0.2, 0.3));
}

TEST(SplitConformal, EachStepAndLevelHasItsOwnOffset) {
  // 3 windows of 2 steps, one level 0.5 (rank ceil(4 * 0.5) = 2): step 1's residuals
  // 1-0.5, 2-0.5, 3-0.5 -> 1.5; step 2's 0-1, 4-1, -2-1 -> -1.
  const std::vector<double> outcomes{1, 0, 2, 4, 3, -2};
  const std::vector<double> forecasts{0.5, 1, 0.5, 1, 0.5, 1};
  const auto fitted = fit_split_conformal(forecasts, outcomes, 2, {0.5});
  EXPECT_THAT(fitted.offsets, ElementsAre(1.5, -1.0));
  EXPECT_EQ(fitted.at(1, 0), -1.0);
}

TEST(SplitConformal, OffsetsApplyThenCrossingQuantilesAreSorted) {
  const ConformalOffsets offsets{{0.1, 0.9}, 1, {0.5, -0.5}};
  std::vector<double> forecasts{-0.2, 0.2, -1.0, 1.0};  // two windows
  apply_offsets(offsets, forecasts);
  EXPECT_THAT(forecasts, ElementsAre(-0.3, 0.3, -0.5, 0.5));  // the first window's pair crossed
}

TEST(SplitConformal, RefusesWhatDoesNotFit) {
  EXPECT_THAT([] { fit_split_conformal(std::vector<double>(4), std::vector<double>(3), 1, {0.5}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("4 forecast values for 3 windows")));
  EXPECT_THAT([] { fit_split_conformal(std::vector<double>(1), std::vector<double>(1), 1, {1.0}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("outside (0, 1)")));
  const ConformalOffsets offsets{{0.5}, 2, {0.0, 0.0}};
  std::vector<double> three(3);
  EXPECT_THAT([&] { apply_offsets(offsets, three); }, ::testing::ThrowsMessage<Error>(HasSubstr("do not fit 3")));
}

TEST(AdaptiveConformal, AMissRaisesTheOffsetAndAHitLowersIt) {
  AdaptiveConformal tracker({0.9}, 1, 0.1);
  tracker.forecast_made(0, 0, std::vector<double>{0.0});
  tracker.outcome(0, 1, 1.0);  // 1 > 0: a miss, offset += 0.1 * 0.9
  EXPECT_DOUBLE_EQ(tracker.offsets_for(0).offsets[0], 0.09);
  tracker.forecast_made(0, 1, std::vector<double>{0.0});  // issued at 0.09
  tracker.outcome(0, 2, 0.05);                            // 0.05 <= 0.09: a hit, offset += 0.1 * (0.9 - 1)
  EXPECT_DOUBLE_EQ(tracker.offsets_for(0).offsets[0], 0.09 - 0.01);
  EXPECT_EQ(tracker.offsets_for(7).offsets[0], 0.0);  // a series never seen
}

TEST(AdaptiveConformal, StepHLearnsOnlyWhenItsBarArrivesNoLookAhead) {
  // One forecast of 3 steps after bar 10; the outcomes of bars 11, 12 and 13 reach steps 1,
  // 2 and 3 in turn, each a miss for level 0.5 (offset += 0.05).
  AdaptiveConformal tracker({0.5}, 3, 0.1);
  tracker.forecast_made(4, 10, std::vector<double>{0.0, 0.0, 0.0});
  tracker.outcome(4, 11, 1.0);
  EXPECT_THAT(tracker.offsets_for(4).offsets, ElementsAre(0.05, 0.0, 0.0));
  tracker.outcome(4, 12, 1.0);
  EXPECT_THAT(tracker.offsets_for(4).offsets, ElementsAre(0.05, 0.05, 0.0));
  tracker.outcome(4, 13, 1.0);
  EXPECT_THAT(tracker.offsets_for(4).offsets, ElementsAre(0.05, 0.05, 0.05));
  // A forecast made before a bar's outcome is scored against what it issued then, not
  // against the offsets learned since.
  tracker.forecast_made(4, 13, std::vector<double>{0.0, 0.0, 0.0});  // issued at 0.05 each
  tracker.outcome(4, 14, 0.04);                                      // a hit at step 1: -0.05
  EXPECT_THAT(tracker.offsets_for(4).offsets, ElementsAre(0.0, 0.05, 0.05));
  EXPECT_THAT([&] { tracker.outcome(4, 14, 0.0); },
              ::testing::ThrowsMessage<Error>(HasSubstr("the outcome of bar 14 came after that of bar 14")));
}

TEST(AdaptiveConformal, RefusesARateOutOfRange) {
  EXPECT_THAT([] { AdaptiveConformal({0.5}, 1, 0.0); }, ::testing::ThrowsMessage<Error>(HasSubstr("(0, 1]")));
  EXPECT_THAT([] { AdaptiveConformal({0.5}, 1, 1.5); }, ::testing::ThrowsMessage<Error>(HasSubstr("got 1.5")));
}

}  // namespace
}  // namespace qtft::eval
