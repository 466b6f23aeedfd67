// `qtft evaluate --conformal split`: offsets fitted on the validation split, the test split's
// coverage with and without them (the arithmetic itself: tests/eval/conformal_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;

const std::string kModel = std::string(QTFT_TEST_DATA_DIR) + "/golden/declared_b7a7acb_fp32.safetensors";

TEST(ConformalCli, EvaluateReportsRawAndConformalCoverageOfTheTestSplit) {
  test::TempDir dir;
  const std::string bars = dir.file("bars.csv"), metrics = dir.file("metrics.json");
  ASSERT_EQ(run_qtft(dir, "make-data --output " + bars + " --rows 616 --symbols 2 --extra-inputs 5").exit_code, 0);
  auto run = run_qtft(
      dir, "evaluate --load-model " + kModel + " --csv-file " + bars + " --conformal split --metrics-json " + metrics);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("conformal quantiles (split: offsets per step and level from the validation split's"));
  const auto j = nlohmann::json::parse(test::read_text(metrics));
  const auto& c = j.at("conformal");
  EXPECT_EQ(c.at("method"), "split");
  EXPECT_EQ(c.at("windows"), j.at("windows"));
  EXPECT_EQ(c.at("offsets").size(), 4u * 3u);  // horizon 4, three levels
  EXPECT_DOUBLE_EQ(c.at("nominal_interval").get<double>(), 0.9 - 0.1);
  // The raw quantiles are the model's: their loss is the evaluation's, up to float sums.
  EXPECT_NEAR(c.at("raw").at("loss").get<double>(), j.at("test_loss").get<double>(),
              1e-5 * j.at("test_loss").get<double>());
  // Offsets from the validation split move every level's coverage of the test split
  // towards its level (this barely trained model's raw quantiles cross: q0.1 lies above
  // most outcomes, q0.9 below them).
  const auto& levels = c.at("levels");
  for (size_t k = 0; k < levels.size(); ++k) {
    const double level = levels[k].get<double>();
    const double raw = c.at("raw").at("coverage")[k].get<double>();
    const double conformal = c.at("conformal").at("coverage")[k].get<double>();
    EXPECT_LT(std::abs(conformal - level), std::abs(raw - level)) << "level " << level;
  }
  EXPECT_LT(c.at("conformal").at("loss").get<double>(), c.at("raw").at("loss").get<double>());
}

TEST(ConformalCli, AnUnknownMethodIsAUsageError) {
  test::TempDir dir;
  const std::string bars = dir.file("bars.csv");
  ASSERT_EQ(run_qtft(dir, "make-data --output " + bars + " --rows 616 --symbols 2 --extra-inputs 5").exit_code, 0);
  auto run = run_qtft(dir, "evaluate --load-model " + kModel + " --csv-file " + bars + " --conformal jackknife");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--conformal: jackknife not in {split}"));
  // Measured on the split it was fitted on, the coverage would be in-sample.
  run = run_qtft(dir,
                 "evaluate --load-model " + kModel + " --csv-file " + bars + " --conformal split --split validation");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err,
              HasSubstr("fits its offsets on the validation split, so it cannot measure the validation split"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("windows (metrics in units")));  // refused before evaluating
}

}  // namespace
}  // namespace qtft
