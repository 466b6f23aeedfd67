// The calibration coverage report: each window's regime, the training split's terciles, and
// the warnings for calibration batches that miss a regime or see too little of it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "qtft/data/bars/synthetic.h"
#include "qtft/data/features/batch_order.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/regime_coverage.h"

namespace qtft::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(WindowRegime, HandComputedValues) {
  const std::vector<float> straight{0.5f, 0.5f, 0.5f, 0.5f};
  EXPECT_DOUBLE_EQ(window_regime(straight).volatility, 0.5);
  EXPECT_DOUBLE_EQ(window_regime(straight).trend_strength, 1.0);
  const std::vector<float> round_trip{1.0f, -1.0f, 1.0f, -1.0f};
  EXPECT_DOUBLE_EQ(window_regime(round_trip).volatility, 1.0);
  EXPECT_DOUBLE_EQ(window_regime(round_trip).trend_strength, 0.0);
  const std::vector<float> mixed{3.0f, -1.0f};
  EXPECT_DOUBLE_EQ(window_regime(mixed).volatility, std::sqrt(5.0));
  EXPECT_DOUBLE_EQ(window_regime(mixed).trend_strength, 0.5);
  const std::vector<float> flat{0.0f, 0.0f};
  EXPECT_DOUBLE_EQ(window_regime(flat).volatility, 0.0);
  EXPECT_DOUBLE_EQ(window_regime(flat).trend_strength, 0.0);
}

TEST(CalibrationWindows, BatchesOfOneOrderOfTheirOwnWrappingAroundTheSplit) {
  auto ids = calibration_windows(10, 3, 4, 7);
  ASSERT_EQ(ids.size(), 12u);
  std::vector<size_t> first(ids.begin(), ids.begin() + 10);
  std::sort(first.begin(), first.end());
  std::vector<size_t> all(10);
  std::iota(all.begin(), all.end(), size_t{0});
  EXPECT_EQ(first, all);  // every window once before any repeats
  EXPECT_EQ(ids[10], ids[0]);
  EXPECT_EQ(ids[11], ids[1]);
  auto epoch_minus_one = BatchOrder(10, 4, 7, true).epoch_order(-1);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(ids[i], epoch_minus_one[i]);
  EXPECT_NE(std::vector<size_t>(ids.begin(), ids.begin() + 10), BatchOrder(10, 4, 7, true).epoch_order(0).slice(0, 10));
  EXPECT_TRUE(calibration_windows(10, 0, 4, 7).empty());
}

class RegimeCoverageTest : public ::testing::Test {
 protected:
  static const Dataset& dataset() {
    static const Dataset d = [] {
      SyntheticOptions o;
      o.rows = 4000;
      DatasetOptions windows;
      windows.encoder_length = 32;
      windows.horizon = 4;
      return Dataset::build(generate_synthetic_bars(o), windows);
    }();
    return d;
  }
  static std::vector<size_t> every_training_window() {
    std::vector<size_t> ids(dataset().num_windows(Split::Train));
    std::iota(ids.begin(), ids.end(), size_t{0});
    return ids;
  }
  // The training windows whose volatility tercile under `cuts` is `tercile`.
  static std::vector<size_t> windows_in(const RegimeCoverage& cuts, size_t tercile) {
    std::vector<size_t> ids;
    const auto& d = dataset();
    const auto length = static_cast<size_t>(d.options().encoder_length);
    for (size_t i = 0; i < d.num_windows(Split::Train); ++i) {
      auto w = d.window(Split::Train, i);
      double v =
          window_regime(d.series()[w.series].target.subspan(w.start, length)).volatility * d.schema().target_scale;
      size_t k = v < cuts.volatility.lower_cut ? 0 : (v < cuts.volatility.upper_cut ? 1 : 2);
      if (k == tercile) ids.push_back(i);
    }
    return ids;
  }
};

TEST_F(RegimeCoverageTest, CalibratingOnTheWholeSplitCoversEveryRegimeAsTrainingDoes) {
  auto ids = every_training_window();
  auto c = regime_coverage(dataset(), ids, 100);
  EXPECT_EQ(c.training_sampled, ids.size());
  EXPECT_EQ(c.calibration_windows, ids.size());
  EXPECT_EQ(c.volatility.calibration, c.volatility.training);
  EXPECT_EQ(c.trend.calibration, c.trend.training);
  EXPECT_LT(c.volatility.lower_cut, c.volatility.upper_cut);
  EXPECT_GT(c.trend.lower_cut, 0.0);
  EXPECT_LT(c.trend.upper_cut, 1.0);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  EXPECT_THAT(format_regime_coverage(c), HasSubstr("every regime covered"));
  // The deployment checklist's minimum of 100 batches.
  auto few = regime_coverage(dataset(), ids, 99);
  EXPECT_THAT(few.warnings,
              ElementsAre("few: 99 calibration batches, under the 100 the deployment checklist asks for"));
}

TEST_F(RegimeCoverageTest, TercilesAreCutOnAnEvenlySpacedSampleOfTheSplit) {
  auto ids = every_training_window();
  auto c = regime_coverage(dataset(), ids, 100, 300);
  EXPECT_EQ(c.training_windows, ids.size());
  EXPECT_EQ(c.training_sampled, 300u);
  // Continuous measures have no ties: the 1/3 and 2/3 order statistics cut 100, 100, 100.
  EXPECT_THAT(c.volatility.training, ElementsAre(100u, 100u, 100u));
  EXPECT_THAT(c.trend.training, ElementsAre(100u, 100u, 100u));
  EXPECT_EQ(c.volatility.calibration[0] + c.volatility.calibration[1] + c.volatility.calibration[2], ids.size());
}

TEST_F(RegimeCoverageTest, WarnsWhenCalibrationMissesAVolatilityRegime) {
  auto cuts = regime_coverage(dataset(), every_training_window(), 100);
  auto calm = windows_in(cuts, 0);
  ASSERT_FALSE(calm.empty());
  auto c = regime_coverage(dataset(), calm, 100);
  EXPECT_EQ(c.volatility.lower_cut, cuts.volatility.lower_cut);
  EXPECT_THAT(c.volatility.calibration, ElementsAre(calm.size(), 0u, 0u));
  ASSERT_GE(c.warnings.size(), 2u);
  EXPECT_THAT(c.warnings[0], ::testing::MatchesRegex("missing: no calibration window in the normal tercile of "
                                                     "volatility \\([0-9]+% of training\\)"));
  EXPECT_THAT(c.warnings[1], HasSubstr("missing: no calibration window in the volatile tercile of volatility"));
  auto text = format_regime_coverage(c);
  EXPECT_THAT(text, HasSubstr("volatility (cuts "));
  EXPECT_THAT(text, HasSubstr("calm 100% / "));
  EXPECT_THAT(text, HasSubstr("WARNING missing: no calibration window in the volatile tercile"));
  auto j = to_json(c);
  EXPECT_EQ(j["volatility"]["terciles"][2]["regime"], "volatile");
  EXPECT_EQ(j["volatility"]["terciles"][2]["calibration_windows"], 0);
  EXPECT_EQ(j["warnings"].size(), c.warnings.size());
}

TEST_F(RegimeCoverageTest, WarnsWhenARegimeIsThin) {
  auto cuts = regime_coverage(dataset(), every_training_window(), 100);
  auto calm = windows_in(cuts, 0), normal = windows_in(cuts, 1), volatile_ = windows_in(cuts, 2);
  // Calm and normal windows alike, and one volatile window for every ten of them: about 5%
  // of calibration against about a third of training.
  std::vector<size_t> ids = calm;
  ids.insert(ids.end(), normal.begin(), normal.end());
  const size_t volatile_count = ids.size() / 10;
  ASSERT_LE(volatile_count, volatile_.size());
  ids.insert(ids.end(), volatile_.begin(), volatile_.begin() + static_cast<std::ptrdiff_t>(volatile_count));
  auto c = regime_coverage(dataset(), ids, 100);
  EXPECT_THAT(c.volatility.calibration, ElementsAre(calm.size(), normal.size(), volatile_count));
  std::vector<std::string> volatility_warnings;
  for (const auto& w : c.warnings) {
    if (w.find("of volatility") != std::string::npos) volatility_warnings.push_back(w);
  }
  ASSERT_EQ(volatility_warnings.size(), 1u);
  EXPECT_THAT(volatility_warnings[0], ::testing::MatchesRegex("thin: the volatile tercile of volatility is [0-9]+% of "
                                                              "calibration windows against [0-9]+% of training"));
}

}  // namespace
}  // namespace qtft::data
