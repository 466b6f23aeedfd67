#include "qtft/eval/desk_metrics.h"

#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "qtft/common/error.h"

namespace qtft::eval {
namespace {

at::Tensor doubles(const std::vector<double>& v, std::vector<int64_t> shape) {
  return at::tensor(v, at::TensorOptions().dtype(at::kDouble)).reshape(shape);
}

TEST(RankCorrelationTest, SpearmanByHandWithAndWithoutTies) {
  // d = 0, -1, 1, 0: 1 - 6 * 2 / (4 * 15).
  EXPECT_DOUBLE_EQ(rank_correlation(std::vector<double>{1, 2, 3, 4}, std::vector<double>{10, 30, 20, 40}), 0.8);
  // Ranks 1.5, 1.5, 3 against 1, 2, 3: 1.5 / sqrt(1.5 * 2).
  EXPECT_NEAR(rank_correlation(std::vector<double>{1, 1, 2}, std::vector<double>{1, 2, 3}), 1.5 / std::sqrt(3.0),
              1e-15);
  EXPECT_TRUE(std::isnan(rank_correlation(std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 3})));
}

// One series, four 5-minute bars, quantiles 0.1, 0.5, 0.9, one horizon step, 10 bps.
TEST(DeskMetricsTest, OneSeriesByHand) {
  DeskMetricsAccumulator desk({0.1, 0.5, 0.9}, 10.0);
  const at::Tensor forecast = doubles({-1, 0.5, 2, -2, -1, 0, -1, 1, 3, -3, -0.5, 1}, {4, 1, 3});
  const at::Tensor realized = doubles({1, 0.5, -2, -1}, {4, 1});
  // Two batches, the later bars first: the result does not depend on the order.
  desk.add(forecast.narrow(0, 2, 2), realized.narrow(0, 2, 2), std::vector<int64_t>{0, 0},
           std::vector<int64_t>{600'000'000'000, 900'000'000'000});
  desk.add(forecast.narrow(0, 0, 2), realized.narrow(0, 0, 2), std::vector<int64_t>{0, 0},
           std::vector<int64_t>{0, 300'000'000'000});
  const DeskMetrics m = desk.result();
  EXPECT_EQ(m.windows, 4);
  // At or below q10: bar 3 only; q50: bars 3 and 4; q90: bars 1, 3, 4. Between: bars 1, 4.
  EXPECT_EQ(m.coverage, (std::vector<double>{0.25, 0.5, 0.75}));
  EXPECT_DOUBLE_EQ(m.interval_coverage, 0.5);
  EXPECT_DOUBLE_EQ(m.interval_nominal, 0.8);
  EXPECT_DOUBLE_EQ(m.hit_rate, 0.5);  // bars 1 and 4 have the median's sign
  // Medians rank 3, 1, 4, 2 and outcomes 4, 3, 1, 2: d^2 sums to 14, rho = 1 - 6 * 14 / 60.
  ASSERT_EQ(m.ic_pooled.size(), 1u);
  EXPECT_NEAR(m.ic_pooled[0].ic, -0.4, 1e-15);
  EXPECT_NEAR(m.ic_pooled[0].t, -0.4 * std::sqrt(2.0 / 0.84), 1e-14);
  EXPECT_EQ(m.ic_pooled[0].count, 4);
  ASSERT_EQ(m.ic_per_series.size(), 1u);
  EXPECT_NEAR(m.ic_per_series[0][0].ic, -0.4, 1e-15);
  EXPECT_EQ(m.ic_across_series[0].count, 0) << "no bar has 3 series";
  EXPECT_TRUE(std::isnan(m.ic_across_series[0].ic));

  // Positions: median / sd(medians) capped to [-1, 1]; sd = sqrt(2.5 / 3).
  const double s = std::sqrt(2.5 / 3.0), a = 0.5 / s;
  const double positions[] = {a, -1.0, 1.0, -a}, outcomes[] = {1, 0.5, -2, -1};
  double previous = 0.0, cumulative = 0.0, peak = 0.0, drawdown = 0.0, sum = 0.0, turnover = 0.0;
  std::vector<double> returns;
  for (int i = 0; i < 4; ++i) {
    const double r = positions[i] * outcomes[i] - 0.001 * std::fabs(positions[i] - previous);
    turnover += std::fabs(positions[i] - previous) / 4;
    previous = positions[i];
    returns.push_back(r);
    sum += r;
    cumulative += r;
    peak = std::max(peak, cumulative);
    drawdown = std::max(drawdown, peak - cumulative);
  }
  const double mean = sum / 4;
  double squares = 0.0;
  for (double r : returns) squares += (r - mean) * (r - mean);
  const double bars_per_year = 365.25 * 86400 / 300;
  EXPECT_NEAR(m.position.mean_return, mean, 1e-15);
  EXPECT_NEAR(m.position.turnover, turnover, 1e-15);
  EXPECT_NEAR(m.position.max_drawdown, drawdown, 1e-15);
  EXPECT_NEAR(drawdown, 0.5 + 0.001 * (1 + a) + 2.0 + 0.002, 1e-12) << "bars 2 and 3 after the peak at bar 1";
  EXPECT_DOUBLE_EQ(m.position.bars_per_year, bars_per_year);
  EXPECT_NEAR(m.position.sharpe, mean / std::sqrt(squares / 3) * std::sqrt(bars_per_year), 1e-9);
  EXPECT_EQ(m.position.bars, 4);
}

TEST(DeskMetricsTest, AcrossSeriesPerBarAndItsT) {
  // Two bars of three series: the medians rank the outcomes perfectly, then in reverse.
  DeskMetricsAccumulator desk({0.1, 0.5, 0.9}, 0.0);
  std::vector<double> f;
  for (double median : {1.0, 2.0, 3.0, 1.0, 2.0, 3.0}) f.insert(f.end(), {median - 1, median, median + 1});
  desk.add(doubles(f, {6, 1, 3}), doubles({1, 2, 3, 3, 2, 1}, {6, 1}), std::vector<int64_t>{0, 1, 2, 0, 1, 2},
           std::vector<int64_t>{0, 0, 0, 60'000'000'000, 60'000'000'000, 60'000'000'000});
  const DeskMetrics m = desk.result();
  EXPECT_EQ(m.ic_across_series[0].count, 2);
  EXPECT_DOUBLE_EQ(m.ic_across_series[0].ic, 0.0);  // (1 + -1) / 2
  EXPECT_DOUBLE_EQ(m.ic_across_series[0].t, 0.0);
  EXPECT_EQ(m.series, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(m.position.bars, 2);
  const auto j = to_json(m, {"ES", "NQ", "CL"});
  EXPECT_TRUE(j.at("ic_per_series").contains("NQ"));
  EXPECT_TRUE(j.at("ic_per_series").at("NQ").at(0).at("ic").is_null()) << "two pairs: no correlation to speak of";
}

TEST(DeskMetricsTest, RefusesANegativeCostAndQuantilesWithoutTheMedian) {
  EXPECT_THROW(DeskMetricsAccumulator({0.1, 0.5, 0.9}, -1.0), UsageError);
  EXPECT_THROW(DeskMetricsAccumulator({0.1, 0.5, 0.9}, std::nan("")), UsageError);
  EXPECT_THROW(DeskMetricsAccumulator({0.1, 0.9}, 0.0), UsageError);
}

}  // namespace
}  // namespace qtft::eval
