// `qtft evaluate --conformal split`: offsets fitted on the validation split, the test split's
// coverage with and without them (the arithmetic itself: tests/eval/conformal_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "qtft/data/bars/bars.h"
#include "qtft/io/tensor_file.h"
#include "support/bar_files.h"
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

// The first forecast's quantile returns in `forecast --json`'s output, step by step.
std::vector<std::vector<double>> returns_of(const std::string& text) {
  const auto forecasts = nlohmann::json::parse(text);
  std::vector<std::vector<double>> out;
  for (const auto& step : forecasts.at(0).at("steps")) out.push_back(step.at("return").get<std::vector<double>>());
  return out;
}

TEST(ConformalCli, TrainSavesSplitOffsetsAndForecastIssuesWithThemOrRefusesAFileWithout) {
  test::TempDir dir;
  dir.write("bars.csv", test::regular_bars_csv(400, "ES"));
  dir.write("recent.csv", test::regular_bars_csv(60, "ES"));
  const std::string model = dir.file("model.safetensors"), plain = dir.file("plain.safetensors");
  const std::string train = "train --csv-file " + dir.file("bars.csv") +
                            " --encoder-length 12 --horizon 3 --epochs 1 --max-batches-per-epoch 2 --hidden-size 8 "
                            "--attention-heads 2 --save-model ";
  auto run = run_qtft(dir, train + model + " --conformal split");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Conformal offsets (split) fitted on "));
  ASSERT_EQ(run_qtft(dir, train + plain).exit_code, 0);

  const std::string forecast = "forecast --csv-file " + dir.file("recent.csv") + " --json --load-model ";
  auto raw = run_qtft(dir, forecast + model);
  auto conformal = run_qtft(dir, forecast + model + " --conformal split");
  ASSERT_EQ(conformal.exit_code, 0) << conformal.err;
  EXPECT_EQ(nlohmann::json::parse(conformal.out).at(0).at("conformal"), "split");
  EXPECT_FALSE(nlohmann::json::parse(raw.out).at(0).contains("conformal"));
  // The offsets moved the quantiles, and they stay in order.
  const auto a = returns_of(raw.out), b = returns_of(conformal.out);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_NE(a, b);
  for (const auto& step : b) EXPECT_TRUE(std::is_sorted(step.begin(), step.end()));

  // A file without offsets, or with the other method's: one line naming the file, exit 1.
  run = run_qtft(dir, forecast + plain + " --conformal split");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(plain + ": holds no conformal offsets (qtft.conformal)"));
  run = run_qtft(dir, forecast + model + " --conformal adaptive");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(model + ": qtft.conformal.method is split, not adaptive"));
  // Offsets that do not fit the model's horizon and quantiles: refused naming the field.
  auto file = io::load_tensor_file(model);
  auto c = nlohmann::json::parse(file.metadata.at("qtft.conformal"));
  c["offsets"]["*"] = {0.0, 0.1};
  file.metadata["qtft.conformal"] = c.dump();
  const std::string bad = dir.file("bad.safetensors");
  io::save_tensor_file(bad, file);
  run = run_qtft(dir, forecast + bad);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(bad + ": qtft.conformal.offsets[\"*\"] holds 2 offsets; the model's horizon 3 x 3 "
                                       "quantiles need 9"));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
}

TEST(ConformalCli, AWalksOffsetsGoOnInWatchWhichSavesThemAndPredictIssuesWithThem) {
  test::TempDir dir;
  // The walk's bars, and the same series 100 bars further on.
  const std::string walked = dir.file("walked.csv"), later = dir.file("later.csv");
  data::write_bars_csv(test::regular_bar_set(600, 2), walked);
  data::write_bars_csv(test::regular_bar_set(700, 2), later);
  auto run = run_qtft(dir, "backtest --csv-file " + walked +
                               " --initial-train-bars 300 --step 100 --encoder-length 12 --horizon 3 --hidden-size 8 "
                               "--attention-heads 2 --epochs 1 --max-batches-per-epoch 2 --conformal adaptive "
                               "--output " +
                               dir.file("walk"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("adaptive conformal: interval coverage"));
  const std::string model = dir.file("walk") + "/models/fold-002.safetensors";
  const auto through = [&] {
    const auto file = io::load_tensor_file(model);
    return nlohmann::json::parse(file.metadata.at("qtft.conformal")).at("through_ns");
  };
  const auto walked_through = through();
  ASSERT_EQ(walked_through.size(), 2u);

  // watch scores the newer half of the later bars: only the windows after the walk's last
  // outcome move the offsets, which it saves back.
  const std::string watch =
      "watch --load-model " + model + " --csv-file " + later + " --conformal adaptive --json " + dir.file("watch.json");
  run = run_qtft(dir, watch);
  EXPECT_THAT(run.exit_code, ::testing::AnyOf(0, 3, 4)) << run.err;
  EXPECT_THAT(run.out, HasSubstr("adaptive conformal over "));
  EXPECT_THAT(run.out, HasSubstr("Saved the adaptive conformal offsets in " + model));
  const auto report = nlohmann::json::parse(test::read_text(dir.file("watch.json")));
  // The walk's last outcome was bar 597 of each series (the first step of its last window,
  // made at bar 596): the windows made at bars 597..696 of the later file are new, 100 per
  // series, steps 1..3 each.
  EXPECT_EQ(report.at("conformal").at("raw").at("outcomes"), 2 * 100 * 3);
  const auto watched_through = through();
  for (const auto& [symbol, bar] : watched_through.items()) {
    EXPECT_GT(bar.get<int64_t>(), walked_through.at(symbol).get<int64_t>()) << symbol;
  }
  // The same bars again: nothing new to learn from, nothing saved.
  run = run_qtft(dir, watch);
  EXPECT_THAT(run.out, HasSubstr("adaptive conformal: no bar after those its offsets learned from"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("Saved the adaptive")));

  run = run_qtft(dir, "predict --load-model " + model + " --csv-file " + later +
                          " --split all --conformal adaptive "
                          "--output " +
                          dir.file("p.csv") + " --metrics-json " + dir.file("p.json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("The rows carry adaptive conformal offsets: interval coverage"));
  EXPECT_EQ(nlohmann::json::parse(test::read_text(dir.file("p.json"))).at("conformal").at("method"), "adaptive");
  run = run_qtft(dir, "predict --load-model " + model + " --csv-file " + later + " --conformal split --output " +
                          dir.file("q.csv"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(model + ": qtft.conformal.method is adaptive, not split"));
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
  // A backtest's conformal is adaptive or split; a rate needs adaptive, moved by its own walk.
  const std::string walk =
      "backtest --csv-file " + bars + " --initial-train-bars 400 --step 100 --output " + dir.file("walk");
  run = run_qtft(dir, walk + " --conformal jackknife");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--conformal: jackknife not in {adaptive,split}"));
  run = run_qtft(dir, walk + " --conformal split --conformal-rate 0.1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--conformal-rate moves adaptive offsets: add --conformal adaptive"));
  run = run_qtft(dir, walk + " --conformal-rate 0.1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--conformal-rate moves adaptive offsets: add --conformal adaptive"));
  run = run_qtft(dir, walk + " --conformal adaptive --conformal-rate 1.5");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--conformal-rate 1.5: must lie in (0, 1]"));
}

}  // namespace
}  // namespace qtft
