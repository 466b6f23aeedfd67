// Baselines: the empirical quantile rule on a known series, and both constant forecasts
// scored on a real dataset against values worked out from its rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ops/tensor.h>

#include <cmath>
#include <limits>

#include "qtft/common/error.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/baselines.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"

namespace qtft::eval {
namespace {

using ::testing::HasSubstr;

const std::vector<double> kQuantiles{0.1, 0.5, 0.9};

data::Dataset small_dataset() {
  data::DatasetOptions o;
  o.encoder_length = 8;
  o.horizon = 3;
  return data::Dataset::build(test::regular_bar_set(201, 2), o);
}

// The targets of every window of `split`, in window order, as the model would see them.
std::vector<double> window_targets(const data::Dataset& d, data::Split split) {
  std::vector<double> out;
  const auto& o = d.options();
  for (size_t i = 0; i < d.num_windows(split); ++i) {
    auto w = d.window(split, i);
    const auto& s = d.series()[w.series];
    for (int64_t t = 0; t < o.horizon; ++t) out.push_back(s.target[w.start + o.encoder_length + t]);
  }
  return out;
}

TEST(EmpiricalQuantiles, LinearInterpolationOnOneToFive) {
  // Sorted 1..5, h = 4q: q 0.1 -> h 0.4 -> 1 + 0.4 * (2 - 1) = 1.4; q 0.25 -> h 1 -> 2;
  // q 0.5 -> h 2 -> 3; q 0.9 -> h 3.6 -> 4 + 0.6 * (5 - 4) = 4.6 (numpy.quantile agrees).
  std::vector<double> values{3, 1, 5, 2, 4};
  auto q = empirical_quantiles(values, {0.1, 0.25, 0.5, 0.9});
  ASSERT_EQ(q.size(), 4u);
  EXPECT_DOUBLE_EQ(q[0], 1.4);
  EXPECT_DOUBLE_EQ(q[1], 2.0);
  EXPECT_DOUBLE_EQ(q[2], 3.0);
  EXPECT_DOUBLE_EQ(q[3], 4.6);
  // Scaling the targets scales their quantiles: 1..5 divided by a std of 2.
  std::vector<double> scaled{1.5, 0.5, 2.5, 1.0, 2.0};
  auto s = empirical_quantiles(scaled, {0.1, 0.9});
  EXPECT_DOUBLE_EQ(s[0], 0.7);
  EXPECT_DOUBLE_EQ(s[1], 2.3);
}

TEST(EmpiricalQuantiles, OneValueAndErrors) {
  std::vector<double> one{7.0};
  EXPECT_EQ(empirical_quantiles(one, {0.1, 0.9}), (std::vector<double>{7.0, 7.0}));
  EXPECT_THAT(test::error_message([] { empirical_quantiles({}, {0.5}); }), HasSubstr("no values"));
  EXPECT_THROW(empirical_quantiles(one, {1.0}), Error);
}

TEST(EmpiricalQuantiles, OfTheDatasetAreThoseOfEveryTrainRow) {
  auto d = small_dataset();
  std::vector<double> train;
  for (const auto& s : d.series()) {
    for (int64_t r = s.split_bounds[0]; r < s.split_bounds[1]; ++r) train.push_back(s.target[r]);
  }
  ASSERT_GT(train.size(), 200u);
  auto q = empirical_target_quantiles(d, kQuantiles);
  EXPECT_EQ(q, empirical_quantiles(train, kQuantiles));
  // Found by selection over the dataset's arrays, not by sorting a copy: the same values bit
  // for bit, at the tails too.
  const std::vector<double> many{0.001, 0.01, 0.33, 0.5, 0.77, 0.99, 0.999};
  EXPECT_EQ(empirical_target_quantiles(d, many), empirical_quantiles(train, many));
  EXPECT_LT(q[0], q[1]);
  EXPECT_LT(q[1], q[2]);
}

TEST(Baselines, ZeroForecastLossIsHalfTheMeanAbsoluteTarget) {
  // With f = 0 the pinball of quantile q is q*y for y > 0 and (1 - q)*|y| for y < 0;
  // over 0.1, 0.5, 0.9 both sum to 1.5|y|, so the loss is 0.5 * mean |y|, the median's
  // error is y itself (rmse = sqrt(mean y^2), mae = mean |y|) and p50 = 2 * 0.5 * 1 = 1.
  auto d = small_dataset();
  auto y = window_targets(d, data::Split::Validation);
  double abs_sum = 0, sq_sum = 0;
  for (double v : y) {
    abs_sum += std::abs(v);
    sq_sum += v * v;
  }
  const double n = static_cast<double>(y.size());

  auto b = evaluate_baselines(d, data::Split::Validation, kQuantiles, 16);
  EXPECT_EQ(b.zero.count, static_cast<int64_t>(d.num_windows(data::Split::Validation)) * 3);
  EXPECT_NEAR(b.zero.loss, 0.5 * abs_sum / n, 1e-12);
  EXPECT_NEAR(b.zero.mae, abs_sum / n, 1e-12);
  EXPECT_NEAR(b.zero.rmse, std::sqrt(sq_sum / n), 1e-12);
  EXPECT_NEAR(b.zero.p50, 1.0, 1e-12);
}

TEST(Baselines, EmpiricalForecastIsScoredLikeAnyConstantForecast) {
  auto d = small_dataset();
  auto b = evaluate_baselines(d, data::Split::Test, kQuantiles, 16);
  EXPECT_EQ(b.empirical_values, empirical_target_quantiles(d, kQuantiles));
  // The same constant forecast against the window targets gathered by hand, in order.
  auto y = window_targets(d, data::Split::Test);
  const auto n = static_cast<int64_t>(y.size());
  auto target = at::tensor(y, at::kDouble).reshape({n, 1});
  auto forecast = at::tensor(b.empirical_values, at::kDouble).expand({n, 1, 3});
  MetricsAccumulator acc(kQuantiles);
  acc.add(forecast, target);
  auto expected = acc.result();
  EXPECT_DOUBLE_EQ(b.empirical.loss, expected.loss);
  EXPECT_DOUBLE_EQ(b.empirical.rmse, expected.rmse);
  EXPECT_DOUBLE_EQ(b.empirical.p90, expected.p90);
  EXPECT_EQ(b.empirical.count, n);
}

TEST(Baselines, IndependentOfBatchSize) {
  auto d = small_dataset();
  auto small = evaluate_baselines(d, data::Split::Train, kQuantiles, 7);
  auto large = evaluate_baselines(d, data::Split::Train, kQuantiles, 100000);
  EXPECT_EQ(small.zero.loss, large.zero.loss);
  EXPECT_EQ(small.empirical.loss, large.empirical.loss);
  EXPECT_EQ(small.empirical.p50, large.empirical.p50);
  EXPECT_THROW(evaluate_baselines(d, data::Split::Train, kQuantiles, 0), UsageError);
}

TEST(Baselines, BestIsTheLowerLossAndZeroOnATie) {
  BaselineMetrics b;
  b.zero.loss = 1.0;
  b.empirical.loss = 0.5;
  EXPECT_EQ(b.best_name(), "empirical");
  EXPECT_EQ(&b.best(), &b.empirical);
  b.empirical.loss = 2.0;
  EXPECT_EQ(b.best_name(), "zero");
  EXPECT_EQ(&b.best(), &b.zero);
  b.empirical.loss = 1.0;
  EXPECT_EQ(b.best_name(), "zero");
  b.empirical.loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(b.best_name(), "zero");
}

}  // namespace
}  // namespace qtft::eval
