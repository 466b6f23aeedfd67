// Metrics on a hand-worked case, and accumulation that does not depend on batching.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "qtft/eval/metrics.h"
#include "qtft/eval/quantile_loss.h"
#include "support/temp_dir.h"

namespace qtft::eval {
namespace {

using ::testing::HasSubstr;

const std::vector<double> kQuantiles{0.1, 0.5, 0.9};

// Two windows, one step, quantiles 0.1, 0.5, 0.9; e = y - f:
//   y =  2, f = ( 1, 2.5, 3): e = ( 1, -0.5, -1) -> pinball 0.1, 0.25, 0.1
//   y = -1, f = (-2, 0,   1): e = ( 1, -1,   -2) -> pinball 0.1, 0.5,  0.2
// loss = 1.25 / 6; median errors -0.5, -1: rmse = sqrt(1.25 / 2), mae = 0.75;
// sum |y| = 3: p50 = 2 * (0.25 + 0.5) / 3 = 0.5, which is 2 * sum|y - f50| * 0.5 / sum|y|
// = 2 * 1.5 * 0.5 / 3; p90 = 2 * (0.1 + 0.2) / 3 = 0.2.
at::Tensor hand_forecast() { return at::tensor({1.0, 2.5, 3.0, -2.0, 0.0, 1.0}, at::kFloat).reshape({2, 1, 3}); }
at::Tensor hand_target() { return at::tensor({2.0, -1.0}, at::kFloat).reshape({2, 1}); }

TEST(Metrics, HandComputedCase) {
  MetricsAccumulator acc(kQuantiles);
  acc.add(hand_forecast(), hand_target());
  auto m = acc.result();
  EXPECT_NEAR(m.loss, 1.25 / 6, 1e-15);
  EXPECT_NEAR(m.rmse, std::sqrt(0.625), 1e-15);
  EXPECT_NEAR(m.mae, 0.75, 1e-15);
  EXPECT_NEAR(m.p50, 2 * 1.5 * 0.5 / 3, 1e-15);
  EXPECT_NEAR(m.p90, 0.2, 1e-15);
  EXPECT_EQ(m.count, 2);
}

TEST(Metrics, LossMatchesQuantileLoss) {
  auto forecast = at::randn({4, 3, 3}, at::kDouble), target = at::randn({4, 3}, at::kDouble);
  MetricsAccumulator acc(kQuantiles);
  acc.add(forecast, target);
  EXPECT_NEAR(acc.result().loss, quantile_loss(forecast, target, kQuantiles).item<double>(), 1e-14);
}

TEST(Metrics, TwoBatchesEqualOneBatchOfEverythingExactly) {
  auto forecast = at::randn({7, 4, 3}), target = at::randn({7, 4});
  MetricsAccumulator whole(kQuantiles), parts(kQuantiles);
  whole.add(forecast, target);
  parts.add(forecast.slice(0, 0, 2), target.slice(0, 0, 2));
  parts.add(forecast.slice(0, 2), target.slice(0, 2));
  auto a = whole.result(), b = parts.result();
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.rmse, b.rmse);
  EXPECT_EQ(a.mae, b.mae);
  EXPECT_EQ(a.p50, b.p50);
  EXPECT_EQ(a.p90, b.p90);
  EXPECT_EQ(a.count, 28);
  EXPECT_EQ(b.count, 28);
}

TEST(Metrics, NonContiguousAndGradRequiringInputs) {
  // A transposed view and a forecast that is part of a graph are read as they are.
  auto forecast = hand_forecast().transpose(0, 2).contiguous().transpose(0, 2).requires_grad_(true);
  ASSERT_FALSE(forecast.is_contiguous());
  MetricsAccumulator acc(kQuantiles);
  acc.add(forecast, hand_target());
  EXPECT_NEAR(acc.result().loss, 1.25 / 6, 1e-15);
}

TEST(Metrics, MissingQuantilesGiveNaN) {
  MetricsAccumulator acc({0.1, 0.9});
  acc.add(hand_forecast().index_select(2, at::tensor({0, 2}, at::kLong)), hand_target());
  auto m = acc.result();
  EXPECT_NEAR(m.loss, (0.1 + 0.1 + 0.1 + 0.2) / 4, 1e-15);
  EXPECT_TRUE(std::isnan(m.rmse));
  EXPECT_TRUE(std::isnan(m.mae));
  EXPECT_TRUE(std::isnan(m.p50));
  EXPECT_NEAR(m.p90, 0.2, 1e-15);
}

TEST(Metrics, EmptyIsNaNWithCountZero) {
  auto m = MetricsAccumulator(kQuantiles).result();
  EXPECT_EQ(m.count, 0);
  EXPECT_TRUE(std::isnan(m.loss));
  EXPECT_TRUE(std::isnan(m.p90));
}

TEST(Metrics, JsonHasEveryKeyAndNullForNaN) {
  MetricsAccumulator acc(kQuantiles);
  acc.add(hand_forecast(), hand_target());
  auto j = to_json(acc.result());
  EXPECT_NEAR(j.at("loss").get<double>(), 1.25 / 6, 1e-15);
  EXPECT_NEAR(j.at("p50").get<double>(), 0.5, 1e-15);
  EXPECT_EQ(j.at("count").get<int64_t>(), 2);
  for (const char* key : {"rmse", "mae", "p90"}) EXPECT_TRUE(j.at(key).is_number()) << key;
  auto empty = to_json(MetricsAccumulator(kQuantiles).result());
  EXPECT_TRUE(empty.at("loss").is_null());
  EXPECT_EQ(empty.at("count").get<int64_t>(), 0);
}

// The hand case taken back to the target's units, window 1 by scale 2 and center 1, window 2
// by scale 10 and center 0:
//   y = 5,   f = (3, 6, 7):     e = ( 2, -1,  -2) -> pinball 0.2, 0.5, 0.2
//   y = -10, f = (-20, 0, 10):  e = (10, -10, -20) -> pinball 1,   5,   2
// loss = 8.9 / 6; median errors -1, -10: rmse = sqrt(101 / 2), mae = 5.5; sum |y| = 15:
// p50 = 2 * 5.5 / 15, p90 = 2 * 2.2 / 15. The scaled figures stay the hand case's.
TEST(Metrics, EachWindowTakenBackToTheTargetsUnits) {
  MetricsAccumulator acc(kQuantiles);
  acc.add(hand_forecast(), hand_target(), WindowUnits{{2.0, 10.0}, {1.0, 0.0}});
  const auto m = acc.result();
  EXPECT_NEAR(m.loss, 1.25 / 6, 1e-15);
  EXPECT_NEAR(m.p50, 0.5, 1e-15);
  const auto& u = m.in_target_units;
  EXPECT_NEAR(u.loss, 8.9 / 6, 1e-14);
  EXPECT_NEAR(u.rmse, std::sqrt(101.0 / 2), 1e-14);
  EXPECT_NEAR(u.mae, 5.5, 1e-14);
  EXPECT_NEAR(u.p50, 2 * 5.5 / 15, 1e-14);
  EXPECT_NEAR(u.p90, 2 * 2.2 / 15, 1e-14);

  const auto j = to_json(m).at("in_target_units");
  EXPECT_NEAR(j.at("loss").get<double>(), 8.9 / 6, 1e-14);
  const auto back = target_unit_figures_from_json(j);
  EXPECT_EQ(back.rmse, u.rmse);
  EXPECT_EQ(back.p90, u.p90);
}

TEST(Metrics, TargetUnitsAreNaNUnlessEveryWindowHadThem) {
  MetricsAccumulator none(kQuantiles), mixed(kQuantiles);
  none.add(hand_forecast(), hand_target());
  EXPECT_TRUE(std::isnan(none.result().in_target_units.loss));
  EXPECT_FALSE(to_json(none.result()).contains("in_target_units"));
  mixed.add(hand_forecast(), hand_target(), WindowUnits{{2.0, 10.0}, {1.0, 0.0}});
  mixed.add(hand_forecast(), hand_target());
  EXPECT_TRUE(std::isnan(mixed.result().in_target_units.mae));
  EXPECT_FALSE(std::isnan(mixed.result().mae));
  EXPECT_TRUE(std::isnan(target_unit_figures_from_json(nlohmann::json()).loss));
  EXPECT_THAT(test::error_message([&] {
                none.add(hand_forecast(), hand_target(), WindowUnits{{1.0}, {0.0}});
              }),
              HasSubstr("expected a scale and a center for each of the 2 windows, got 1 and 1"));
}

TEST(Metrics, RejectsMismatchedShapes) {
  MetricsAccumulator acc(kQuantiles);
  EXPECT_THAT(test::error_message([&] { acc.add(hand_forecast().slice(2, 0, 2), hand_target()); }),
              HasSubstr("expected forecast [batch, horizon, 3]"));
  EXPECT_THAT(test::error_message([&] {
                acc.add(hand_forecast(), hand_target().reshape({1, 2}));
              }),
              HasSubstr("expected target [2, 1]"));
  EXPECT_EQ(acc.result().count, 0);
}

}  // namespace
}  // namespace qtft::eval
