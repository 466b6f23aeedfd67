// `qtft forecast` as a desk runs it: a model, a short file of the latest bars under any
// name, and the next horizon past the last bar, as a table, JSON or a file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qtft/common/format.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;

constexpr int64_t kStartNs = 1704184200LL * 1'000'000'000;  // 2024-01-02T08:30:00Z
constexpr int64_t kStepNs = 1800LL * 1'000'000'000;         // 30-minute bars

// Bars [first, first + n) of one FX-like series, without a symbol column.
std::string fx_csv(int first, int n) {
  std::ostringstream out;
  out << "timestamp,open,high,low,close\n";
  for (int i = first; i < first + n; ++i) {
    double close = 0.9 + 0.01 * std::sin(0.2 * i) + 0.0001 * i;
    out << format_utc(kStartNs + i * kStepNs) << "," << close - 0.0005 << "," << close + 0.001 << "," << close - 0.001
        << "," << close << "\n";
  }
  return out.str();
}

class ForecastCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    dir_->write("usdchf_30min.csv", fx_csv(0, 600));
    auto run = run_qtft(*dir_, "train --csv-file " + dir_->file("usdchf_30min.csv") +
                                   " --encoder-length 16 --horizon 4 --hidden-size 8 --attention-heads 2 --epochs 1"
                                   " --max-batches-per-epoch 2 --save-model " +
                                   dir_->file("fx.safetensors"));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    // The latest bars, after the training file's, in a file of another name.
    dir_->write("recent.csv", fx_csv(600, 30));
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return dir_->file("fx.safetensors"); }
  static test::TempDir* dir_;
};

test::TempDir* ForecastCli::dir_ = nullptr;

TEST_F(ForecastCli, PrintsTheNextHorizonPastTheLastBarOfAFileUnderAnyName) {
  auto run = run_qtft(*dir_, "forecast --load-model " + model() + " --csv-file " + dir_->file("recent.csv"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string last = format_utc(kStartNs + 629 * kStepNs);
  EXPECT_THAT(run.out, HasSubstr("usdchf_30min: 4 bars after " + last));
  EXPECT_THAT(run.out, HasSubstr("timestamps continued at the median bar spacing of 30 min"));
  EXPECT_THAT(run.out, HasSubstr(format_utc(kStartNs + 630 * kStepNs)));  // step 1
  EXPECT_THAT(run.out, HasSubstr(format_utc(kStartNs + 633 * kStepNs)));  // step 4
  EXPECT_THAT(run.out, HasSubstr("price_q0.5"));
}

TEST_F(ForecastCli, JsonAndFileOutputs) {
  auto run = run_qtft(*dir_, "forecast --load-model " + model() + " --csv-file " + dir_->file("recent.csv") +
                                 " --json --output " + dir_->file("f.csv"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto json = nlohmann::json::parse(run.out);
  ASSERT_EQ(json.size(), 1u);
  EXPECT_EQ(json[0]["symbol"], "usdchf_30min");
  EXPECT_EQ(json[0]["timestamps_continued"], true);
  EXPECT_EQ(json[0]["bar_interval_seconds"], 1800.0);
  ASSERT_EQ(json[0]["steps"].size(), 4u);
  for (const auto& step : json[0]["steps"]) {
    ASSERT_EQ(step["price"].size(), 3u);
    // Quantiles are ordered by level in a trained model only; finite and positive always.
    for (double p : step["price"]) EXPECT_GT(p, 0.0);
  }
  auto csv = test::read_text(dir_->file("f.csv"));
  EXPECT_THAT(csv.substr(0, csv.find('\n')), ::testing::Not(HasSubstr("actual_return")));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 4);
}

TEST_F(ForecastCli, BadInputsGetClearErrors) {
  dir_->write("three.csv", fx_csv(600, 3));
  auto run = run_qtft(*dir_, "forecast --load-model " + model() + " --csv-file " + dir_->file("three.csv"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("3 bars given, the model needs at least 17"));
  run = run_qtft(*dir_, "forecast --load-model " + model());
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--parquet-file or --csv-file"));
  run = run_qtft(*dir_,
                 "forecast --load-model " + model() + " --csv-file " + dir_->file("recent.csv") + " --output f.txt");
  EXPECT_EQ(run.exit_code, 2);
  run = run_qtft(*dir_, "forecast --load-model " + model() + " --csv-file " + dir_->file("recent.csv") + " --output " +
                            dir_->file("no/such/dir/f.csv"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("does not exist"));
  dir_->write("volume.csv", "timestamp,symbol,close\n2024-01-01T00:00:00Z,EURUSD,1.1\n");
  run = run_qtft(*dir_,
                 "forecast --load-model " + model() + " --csv-file " + dir_->file("volume.csv") + " --symbol EURUSD");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("--symbol EURUSD names the series of files without one"));
}

TEST_F(ForecastCli, EvaluateAcceptsTheSameSeriesUnderAnotherFileName) {
  dir_->write("renamed.csv", fx_csv(0, 600));
  auto run = run_qtft(*dir_, "evaluate --load-model " + model() + " --csv-file " + dir_->file("renamed.csv"));
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

}  // namespace
}  // namespace qtft
