// The conformal arithmetic against values computed by hand.
#include "qtft/eval/conformal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "qtft/common/error.h"

namespace qtft::eval {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

::testing::Matcher<double> Near(double x) { return ::testing::DoubleNear(x, 1e-12); }

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

TEST(AdaptiveConformal, StepsLandOnTheBarsNamedAndTheStateGoesOnExactly) {
  // Timestamps as bars: a forecast at 100 lands on 105 and 110 (a gap of one bar's time
  // skipped nothing: the steps are the bars named).
  AdaptiveConformal tracker({0.2, 0.8}, 2, 0.5);
  const auto issued =
      tracker.forecast_made(1, std::vector<int64_t>{105, 110}, std::vector<double>{-1.0, 1.0, -2.0, 2.0});
  EXPECT_THAT(issued, ElementsAre(-1.0, 1.0, -2.0, 2.0));  // no offsets yet
  // Step 1's outcome: 0 lies above -1 (level 0.2 not covered: +0.5 x 0.2) and at or below 1
  // (level 0.8 covered: +0.5 x (0.8 - 1)).
  tracker.outcome(1, 105, 0.0);
  EXPECT_THAT(tracker.offsets_for(1).offsets, ElementsAre(Near(0.1), Near(-0.1), 0.0, 0.0));
  // Saved between two outcomes and read back, it goes on as the one never saved.
  auto copy = AdaptiveConformal::from_json(tracker.to_json());
  for (auto* t : {&tracker, &copy}) {
    t->forecast_made(1, std::vector<int64_t>{110, 115},
                     std::vector<double>{0.0, 0.0, 0.0, 0.0});  // issued 0.1, -0.1, 0, 0
    t->outcome(1, 110, 3.0);  // the first forecast's step 2 (-2, 2) and the second's step 1 (0.1, -0.1): all misses
  }
  EXPECT_EQ(copy.to_json(), tracker.to_json());
  EXPECT_THAT(tracker.offsets_for(1).offsets, ElementsAre(Near(0.2), Near(0.3), Near(0.1), Near(0.4)));
  EXPECT_THAT([&] { copy.outcome(1, 109, 0.0); },
              ::testing::ThrowsMessage<Error>(HasSubstr("came after that of bar 110")));
  EXPECT_THAT(
      [] {
        AdaptiveConformal::from_json(nlohmann::json{{"levels", {0.5}}, {"horizon", 1}});
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("adaptive conformal state:")));
}

TEST(CoverageTally, SharesAndPinballLossByHand) {
  CoverageTally tally({0.1, 0.9});
  tally.add(std::vector<double>{-1.0, 1.0}, 0.0, 2.0);  // inside; losses 0.1 * 1 + 0.1 * 1 = 0.2
  tally.add(std::vector<double>{-1.0, 1.0}, 3.0, 1.0);  // above both; 0.1 * 4 + 0.9 * 2 = 2.2
  const auto c = tally.result();
  EXPECT_THAT(c.below, ElementsAre(0.0, 0.5));
  EXPECT_DOUBLE_EQ(c.interval, 0.5);
  EXPECT_DOUBLE_EQ(c.loss, (0.2 + 2.2) / 4);
  EXPECT_DOUBLE_EQ(c.loss_in_target_units, (0.2 * 2 + 2.2) / 4);
  EXPECT_EQ(c.outcomes, 2);
  EXPECT_TRUE(std::isnan(CoverageTally({0.5}).result().interval));
}

TEST(AdaptiveConformal, RefusesARateOutOfRange) {
  EXPECT_THAT([] { AdaptiveConformal({0.5}, 1, 0.0); }, ::testing::ThrowsMessage<Error>(HasSubstr("(0, 1]")));
  EXPECT_THAT([] { AdaptiveConformal({0.5}, 1, 1.5); }, ::testing::ThrowsMessage<Error>(HasSubstr("got 1.5")));
}

}  // namespace
}  // namespace qtft::eval
