// `qtft backtest` and `qtft report` as a user runs them: a QAT walk forward that forecasts
// with each fold's int8 export, its report rendered by a headless browser (the screenshot
// is kept in the build folder), and the refusals of bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "qtft/data/bars/backtest_forecasts.h"
#include "qtft/data/bars/bars.h"
#include "support/bar_files.h"
#include "support/browser.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

class BacktestCli : public ::testing::Test {
 protected:
  void SetUp() override {
    csv_ = dir_.file("bars.csv");
    data::write_bars_csv(regular_bar_set(600, 2), csv_);
  }
  // A small model on the 2 x 600 bars: the first fold trains on 300, then steps of 100.
  std::string walk(const std::string& more, const std::string& step = "100",
                   const std::string& initial_bars = "300") const {
    return "backtest --csv-file '" + csv_ +
           "' --encoder-length 12 --horizon 3 --hidden-size 8 --attention-heads 2 --epochs 1 --batch-size 32 "
           "--max-batches-per-epoch 4 --initial-train-bars " +
           initial_bars + " --step " + step + " " + more;
  }
  TempDir dir_;
  std::string csv_;
};

TEST_F(BacktestCli, RefusesBadInputInOneLineAndWritesNothing) {
  const std::string out = dir_.file("walk");
  struct Case {
    std::string args, message;
    int exit_code;
  };
  const Case cases[] = {
      {walk("--output '" + out + "'", "2"), "--step 2: shorter than the horizon (3 bars)", 2},
      {walk("--cost-bps -5 --output '" + out + "'"), "--cost-bps -5", 2},
      {walk("--output '" + out + "'", "100", "900"), "--initial-train-bars 900: beyond the data, which has 600 bars",
       2},
      {walk("--output '" + out + "'", "1y"), "--step 1y: unknown unit 'y'", 2},
      {walk("--int8 --output '" + out + "'"), "--int8 forecasts with each fold's int8 export", 2},
      {"report --backtest '" + dir_.path().string() + "' --output '" + dir_.file("r.html") + "'",
       "not a backtest's output (no folds.json)", 2},
      {"report --output '" + dir_.file("r.html") + "'",
       "give --backtest DIR (a backtest's output), --tune DIR (a search's) or --load-model", 2},
  };
  for (const auto& c : cases) {
    const auto run = run_qtft(dir_, c.args, kHangGuard);
    EXPECT_EQ(run.exit_code, c.exit_code) << c.args << "\n" << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.message)) << c.args;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
  EXPECT_FALSE(fs::exists(dir_.file("r.html")));
  // A folder of other files is not written into.
  fs::create_directories(out);
  std::ofstream(fs::path(out) / "mine.txt") << "keep";
  const auto run = run_qtft(dir_, walk("--output '" + out + "'"), kHangGuard);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("holds files but no folds.json"));
  EXPECT_EQ(read_text(out + "/mine.txt"), "keep");
}

TEST_F(BacktestCli, QatWalkForwardWithInt8ForecastsAndItsReportsRenderInABrowser) {
  const std::string out = dir_.file("walk");
  auto run = run_qtft(
      dir_, walk("--use-qat --qat-calibration-batches 2 --int8 --cost-bps 1 --refit update --output '" + out + "'"),
      kHangGuard);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("Walk forward: 3 folds (0 to 2) over 600 bars"));
  EXPECT_THAT(run.out, HasSubstr("fold 2 of 0-2: update on the bars through"));
  EXPECT_THAT(run.out, HasSubstr("  196 windows out of sample"));
  EXPECT_THAT(run.out, HasSubstr("Across 3 folds (596 windows)"));
  const auto doc = nlohmann::json::parse(read_text(out + "/folds.json"));
  ASSERT_EQ(doc.at("folds").size(), 3u);
  for (const auto& fold : doc.at("folds")) {
    EXPECT_THAT(fold.at("model").get<std::string>(), HasSubstr(".int8.safetensors"));
    EXPECT_TRUE(fold.contains("explanation"));
  }
  EXPECT_EQ(doc.at("options").at("int8"), "integer");
  const auto forecasts = data::read_backtest_forecasts(out + "/forecasts.parquet");
  EXPECT_EQ(forecasts.rows(), 596u * 3);

  const std::string html = dir_.file("report.html");
  run =
      run_qtft(dir_, "report --backtest '" + out + "' --output '" + html + "' --series S1 --fan-bars 100", kHangGuard);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto page = read_text(html);
  EXPECT_THAT(page, HasSubstr("S1: step 1 forecasts against what happened (last 100 bars)"));
  // The windows as a reader says them, not as JSON; the coverage chart's reference line is
  // the nominal level, which a model's realized coverage may miss.
  EXPECT_THAT(page, ::testing::ContainsRegex("encoder [0-9]+ bars, horizon [0-9]+ bars; validation [0-9.]+%, test "
                                             "[0-9.]+% of each fold's training bars"));
  EXPECT_THAT(page, Not(HasSubstr("encoder_length")));
  EXPECT_THAT(page, HasSubstr("nominal"));
  EXPECT_THAT(page, Not(HasSubstr("calibrated")));
  EXPECT_THAT(page, Not(HasSubstr("http")));  // nothing fetched when viewed
  EXPECT_THAT(page, Not(HasSubstr("src=")));
  run = run_qtft(dir_, "report --backtest '" + out + "' --output '" + html + "' --series XX", kHangGuard);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--series XX: no forecasts of it"));

  expect_renders_in_a_browser(html, "backtest_report.png");

  // The last fold's int8 model on the same bars, as a model's report.
  const std::string model_page = dir_.file("model.html");
  run = run_qtft(dir_,
                 "report --load-model '" + out + "/models/fold-002.int8.safetensors' --csv-file '" + csv_ +
                     "' --split all --cost-bps 1 --series S0 --output '" + model_page + "'",
                 kHangGuard);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto model_html = read_text(model_page);
  EXPECT_THAT(model_html, HasSubstr("Model report: "));
  EXPECT_THAT(model_html, HasSubstr("S0: step 1 forecasts against what happened"));
  EXPECT_THAT(model_html, HasSubstr("Coverage of each quantile"));
  EXPECT_THAT(model_html, HasSubstr("(nominal 0.800)"));
  EXPECT_THAT(model_html, Not(HasSubstr("calibrated")));
  EXPECT_THAT(model_html, Not(HasSubstr("http")));
  expect_renders_in_a_browser(model_page, "model_report.png");
}

// A folder of partitioned Parquet with declared inputs: each fold trains, updates and
// forecasts with them (the folds' importances name them). Walked from its feature store
// (fold 0 from a store of its bars, the rest reading only their own) it ends bit for bit as
// walked in memory.
TEST_F(BacktestCli, WalksAFolderWithDeclaredInputsFromItsStoreAsInMemory) {
  const std::string bars = dir_.file("bars") + "/";
  ASSERT_EQ(run_qtft(dir_, "make-data --output '" + bars + "' --rows 2400 --symbols 2 --extra-inputs 2").exit_code, 0);
  const auto walk_folder = [&](const std::string& out, const std::string& more) {
    const auto run = run_qtft(dir_,
                              "backtest --data '" + bars +
                                  "' --observed lead_signal --known event_flag --encoder-length 12 --horizon 3 "
                                  "--hidden-size 8 --attention-heads 2 --epochs 1 --batch-size 32 "
                                  "--max-batches-per-epoch 4 --initial-train-bars 600 --step 300 --output '" +
                                  out + "' " + more,
                              kHangGuard);
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    return nlohmann::json::parse(read_text(out + "/folds.json"));
  };
  const std::string stored = dir_.file("stored"), in_memory = dir_.file("in-memory");
  const auto doc = walk_folder(stored, "");
  EXPECT_TRUE(fs::exists(bars + "_qtft_store"));  // fold 0 trained from a store
  ASSERT_EQ(doc.at("folds").size(), 2u);          // 1200 bars a symbol: folds at 600 and 900
  for (const auto& fold : doc.at("folds")) {
    const auto& explanation = fold.at("explanation");
    EXPECT_TRUE(explanation.at("encoder_weights").contains("lead_signal")) << explanation.dump();
    EXPECT_TRUE(explanation.at("decoder_weights").contains("event_flag")) << explanation.dump();
  }
  EXPECT_EQ(doc.at("folds")[1].at("training").at("kind"), "update");
  // Fold 0's store is kept for a rerun; the update's own (its bars alone) is gone, and so is
  // a full refit's, which holds the bars through one fold's date.
  const auto stores = [&] {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(bars + "_qtft_store")) names.push_back(entry.path().filename());
    return names;
  };
  const auto after_the_walk = stores();
  EXPECT_EQ(after_the_walk.size(), 1u) << testing::PrintToString(after_the_walk);
  EXPECT_EQ(walk_folder(dir_.file("full"), "--refit full").at("folds")[1].at("training").at("kind"), "train");
  EXPECT_EQ(stores(), after_the_walk);

  const auto memory_doc = walk_folder(in_memory, "--no-feature-store");
  const auto a = data::read_backtest_forecasts(stored + "/forecasts.parquet");
  const auto b = data::read_backtest_forecasts(in_memory + "/forecasts.parquet");
  ASSERT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.origin_ns, b.origin_ns);
  EXPECT_EQ(a.realized, b.realized);
  EXPECT_EQ(a.value, b.value);
  for (size_t k = 0; k < 2; ++k) {
    for (const char* key : {"metrics", "desk", "explanation", "windows"}) {
      EXPECT_EQ(doc.at("folds")[k].at(key), memory_doc.at("folds")[k].at(key)) << k << " " << key;
    }
  }
}

}  // namespace
}  // namespace qtft::test
