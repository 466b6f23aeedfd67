// The learning-rate range test (`qtft tune --find-lr`): the suggestion on a curve computed by
// hand, the sweep's rates, its reproducibility and its stop when the loss diverges.
#include "qtft/train/lr_range_test.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "qtft/common/error.h"
#include "qtft/model/model_building.h"
#include "support/thrown.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

using ::testing::HasSubstr;
const c10::Device kCpu(c10::kCPU);

TEST(LrRangeTest, SuggestsTheRateWhereTheSmoothedLossFallsFastest) {
  // 50 rates a tenth of a decade apart; the smoothed loss is flat at 1 through step 25,
  // then 0.9, 0.5, 0.45 and flat again. Slopes per log-rate by central differences: step 26
  // (0.5 - 1) / 2d, step 27 (0.45 - 0.9) / 2d, step 28 (0.45 - 0.5) / 2d: 26 is steepest.
  LrRangeResult result;
  for (int i = 0; i < 50; ++i) {
    const double smoothed = i <= 25 ? 1.0 : i == 26 ? 0.9 : i == 27 ? 0.5 : 0.45;
    result.points.push_back({std::pow(10.0, -6 + i / 10.0), smoothed, smoothed});
  }
  suggest_learning_rate(result);
  EXPECT_EQ(result.suggested_step, 26);
  EXPECT_EQ(result.suggested, result.points[26].learning_rate);
  EXPECT_EQ(result.lowest_loss_rate, result.points[28].learning_rate);  // the first of the lowest

  // The first tenth of the steps is skipped: a fall there is the average warming up.
  result.points[2].smoothed = -100;
  suggest_learning_rate(result);
  EXPECT_EQ(result.suggested_step, 26);

  // Too few points to tell; a loss that never falls suggests nothing.
  LrRangeResult short_sweep;
  short_sweep.points.assign(result.points.begin(), result.points.begin() + 5);
  suggest_learning_rate(short_sweep);
  EXPECT_TRUE(std::isnan(short_sweep.suggested));
  LrRangeResult rising;
  for (int i = 0; i < 20; ++i) rising.points.push_back({1e-4 * (i + 1), 1.0 + i, 1.0 + i});
  suggest_learning_rate(rising);
  EXPECT_TRUE(std::isnan(rising.suggested));
  EXPECT_EQ(rising.lowest_loss_rate, 1e-4);
}

TEST(LrRangeTest, SweepsGeometricallyAlikeEveryRunAndStopsWhenTheLossDiverges) {
  const auto dataset = test::tiny_dataset();
  const auto train = test::tiny_train_options();
  LrRangeOptions o;
  o.min_learning_rate = 1e-4;
  o.max_learning_rate = 1e-1;
  o.steps = 20;  // more than the training split's batches: the sweep goes on into epoch 2
  const auto sweep = [&] {
    auto model = model::build_model(test::tiny_model_options(dataset), 7);
    return lr_range_test(model, dataset, train, kCpu, o);
  };
  const auto first = sweep();
  ASSERT_EQ(first.points.size(), 20u);
  EXPECT_FALSE(first.diverged);
  EXPECT_EQ(first.points.front().learning_rate, 1e-4);
  EXPECT_DOUBLE_EQ(first.points.back().learning_rate, 1e-1);
  for (size_t i = 1; i < first.points.size(); ++i) {
    EXPECT_NEAR(first.points[i].learning_rate / first.points[i - 1].learning_rate, std::pow(1e3, 1.0 / 19), 1e-12);
  }
  // The moving average, bias-corrected: the first point is its own loss.
  EXPECT_DOUBLE_EQ(first.points.front().smoothed, first.points.front().loss);
  const double w = 1 - 0.98;  // the weight on the newest loss
  const double second = (0.98 * w * first.points[0].loss + w * first.points[1].loss) / (1 - 0.98 * 0.98);
  EXPECT_DOUBLE_EQ(first.points[1].smoothed, second);
  const auto again = sweep();
  ASSERT_EQ(again.points.size(), first.points.size());
  for (size_t i = 0; i < first.points.size(); ++i) EXPECT_EQ(again.points[i].loss, first.points[i].loss) << i;

  // Rates far past any use: the loss climbs beyond 4 times its lowest and the sweep stops.
  o.min_learning_rate = 1e-2;
  o.max_learning_rate = 1e5;
  o.steps = 60;
  const auto wild = sweep();
  EXPECT_TRUE(wild.diverged);
  EXPECT_LT(wild.points.size(), 60u);
}

TEST(LrRangeTest, RefusesOptionsNamingTheFlag) {
  const auto refusal = [](LrRangeOptions o) { return test::message_thrown([&] { o.validate(); }); };
  LrRangeOptions o;
  o.min_learning_rate = 0;
  EXPECT_THAT(refusal(o), HasSubstr("--find-lr-min 0: must be a positive rate"));
  o = {};
  o.max_learning_rate = 1e-7;
  EXPECT_THAT(refusal(o), HasSubstr("--find-lr-max 1e-07: must be above --find-lr-min 1e-06"));
  o = {};
  o.steps = 3;
  EXPECT_THAT(refusal(o), HasSubstr("--find-lr-steps 3: at least 10 steps"));
}

}  // namespace
}  // namespace qtft::train
