// `qtft tune`: the tune file's ranges and refusals, each trial's draw, successive halving's
// rungs, and a search stopped part way that goes on from its journal to the same end.
#include "qtft/train/tune.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "qtft/common/error.h"
#include "qtft/data/bars/bars.h"
#include "qtft/infer/tune_report.h"
#include "qtft/train/run_training.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"
#include "support/thrown.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string refusal(const std::string& text) {
  return test::message_thrown([&] { parse_tune_space(text, "t.json"); });
}

TEST(TuneFile, ReadsChoicesAndRangesAndRefusesWhatCannotBeSearched) {
  const auto space = parse_tune_space(
      R"({"hidden_size": [8, 16], "dropout": {"min": 0, "max": 0.3},
          "learning_rate": {"min": 1e-4, "max": 1e-2, "log": true}, "use_qat": [false, true]})",
      "t.json");
  ASSERT_EQ(space.ranges.size(), 4u);
  EXPECT_EQ(space.ranges.at("hidden_size").choices.size(), 2u);
  EXPECT_TRUE(space.ranges.at("learning_rate").log);
  EXPECT_EQ(space.ranges.at("dropout").max, 0.3);

  EXPECT_THAT(refusal("{\"hidden_size\": [8,\n 16,]}"),
              HasSubstr("t.json: not valid JSON: parse error at line 2, column 5: syntax error"));
  EXPECT_THAT(refusal(R"({"colour": [1]})"), HasSubstr("t.json: 'colour' cannot be tuned (tunable: hidden_size, "));
  EXPECT_THAT(refusal(R"({"hidden_size": []})"), HasSubstr("t.json: hidden_size: the list of choices is empty"));
  EXPECT_THAT(refusal(R"({"hidden_size": [16.5]})"), HasSubstr("hidden_size: choice 16.5 is not an integer"));
  EXPECT_THAT(refusal(R"({"use_qat": ["yes"]})"), HasSubstr("use_qat: choice \"yes\" is not true or false"));
  EXPECT_THAT(refusal(R"({"dropout": {"min": 0.3, "max": 0.1}})"), HasSubstr("dropout: the range [0.3, 0.1] is empty"));
  EXPECT_THAT(refusal(R"({"learning_rate": {"min": 0, "max": 1, "log": true}})"),
              HasSubstr("a log range needs min > 0, got 0"));
  EXPECT_THAT(refusal(R"({"dropout": {"min": 0}})"), HasSubstr("dropout: a range needs both min and max"));
  EXPECT_THAT(refusal("[]"), HasSubstr("t.json: a tune file is a JSON object of options to ranges"));
}

TEST(TuneFile, EachTrialDrawsItsOwnOptionsInRangeAlike) {
  const auto space = parse_tune_space(
      R"({"hidden_size": {"min": 8, "max": 64}, "learning_rate": {"min": 1e-4, "max": 1e-2, "log": true},
          "use_qat": [false, true]})",
      "t.json");
  std::set<std::string> seen;
  for (int64_t trial = 0; trial < 20; ++trial) {
    const auto options = draw_trial(space, 7, trial);
    EXPECT_EQ(options, draw_trial(space, 7, trial));  // whatever ran before
    const auto hidden = options.at("hidden_size");
    ASSERT_TRUE(hidden.is_number_integer());
    EXPECT_GE(hidden.get<int64_t>(), 8);
    EXPECT_LE(hidden.get<int64_t>(), 64);
    const double rate = options.at("learning_rate").get<double>();
    EXPECT_GE(rate, 1e-4);
    EXPECT_LE(rate, 1e-2);
    seen.insert(options.dump());
  }
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_NE(draw_trial(space, 7, 0), draw_trial(space, 8, 0));
}

TEST(TuneHalving, RungsKeepOneInEtaOnEtaTimesTheBudget) {
  const auto rungs = halving_rungs(16, 3);
  ASSERT_EQ(rungs.size(), 3u);
  EXPECT_EQ(rungs[0].trials, 16);
  EXPECT_EQ(rungs[1].trials, 5);
  EXPECT_EQ(rungs[2].trials, 1);
  EXPECT_DOUBLE_EQ(rungs[0].budget, 1.0 / 9);
  EXPECT_DOUBLE_EQ(rungs[1].budget, 1.0 / 3);
  EXPECT_EQ(rungs[2].budget, 1.0);
  EXPECT_EQ(halving_rungs(1, 3).size(), 1u);
  EXPECT_THAT(test::message_thrown([] { halving_rungs(4, 1); }), HasSubstr("--eta must be at least 2"));
}

class Tune : public ::testing::Test {
 protected:
  void SetUp() override {
    csv_ = dir_.file("bars.csv");
    data::write_bars_csv(test::regular_bar_set(300, 2), csv_);
    std::ofstream(dir_.file("space.json")) << R"({"hidden_size": [8, 16], "learning_rate": {"min": 1e-3, "max": 1e-2,
                                                   "log": true}})";
  }
  TuneOptions options(const std::string& folder) const {
    TuneOptions o;
    o.source.csv_file = csv_;
    o.base.dataset.encoder_length = 12;
    o.base.dataset.horizon = 3;
    o.base.architecture.attention_heads = 2;
    o.base.train = test::tiny_train_options();
    o.base.train.epochs = 2;
    o.tune_file = dir_.file("space.json");
    o.space = read_tune_file(o.tune_file);
    o.trials = 4;
    o.eta = 2;
    o.output = dir_.file(folder);
    return o;
  }
  test::TempDir dir_;
  std::string csv_;
};

// Stops the search once `after` trial runs are finished.
class StopAfter : public TuneEvents {
 public:
  explicit StopAfter(int64_t after) : after_(after) {}
  void trial_finished(const TrialRun&) override { ++finished_; }
  bool stop() const { return finished_ >= after_; }

 private:
  int64_t after_, finished_ = 0;
};

TEST_F(Tune, HalvesTheTrialsAndAStoppedSearchGoesOnToTheSameEnd) {
  TuneEvents quiet;
  const auto whole = run_tune(options("whole"), quiet);
  ASSERT_FALSE(whole.interrupted);
  // 4 trials on a quarter of the budget (half an epoch of 6 batches: 3), 2 on a half, 1 on all.
  ASSERT_EQ(whole.runs.size(), 4u + 2u + 1u);
  EXPECT_EQ(whole.runs[0].max_batches_per_epoch, 3);
  EXPECT_EQ(whole.runs[0].epochs, 1);
  EXPECT_EQ(whole.runs.back().epochs, 2);
  // Rung 1 runs the two best of rung 0; the last, the best of rung 1.
  std::vector<TrialRun> rung0(whole.runs.begin(), whole.runs.begin() + 4);
  std::sort(rung0.begin(), rung0.end(), [](const auto& a, const auto& b) { return a.val_loss < b.val_loss; });
  EXPECT_EQ(std::set<int64_t>({whole.runs[4].trial, whole.runs[5].trial}),
            std::set<int64_t>({rung0[0].trial, rung0[1].trial}));
  const auto& best_of_rung1 = whole.runs[4].val_loss <= whole.runs[5].val_loss ? whole.runs[4] : whole.runs[5];
  EXPECT_EQ(whole.runs[6].trial, best_of_rung1.trial);
  ASSERT_TRUE(whole.best.has_value());
  EXPECT_EQ(whole.best->trial, whole.runs[6].trial);
  EXPECT_TRUE(fs::exists(whole.best_model));

  // Stopped after 3 runs (as Ctrl-C or kill -9 would leave it, the journal written after
  // each), then run again: it goes on from the fourth and ends as the one never stopped.
  auto o = options("stopped");
  StopAfter events(3);
  o.base.stop_requested = [&] { return events.stop(); };
  const auto stopped = run_tune(o, events);
  ASSERT_TRUE(stopped.interrupted);
  EXPECT_EQ(stopped.runs.size(), 3u);
  EXPECT_FALSE(stopped.best.has_value());
  o.base.stop_requested = {};
  const auto resumed = run_tune(o, quiet);
  ASSERT_EQ(resumed.runs.size(), whole.runs.size());
  for (size_t k = 0; k < whole.runs.size(); ++k) {
    EXPECT_EQ(resumed.runs[k].trial, whole.runs[k].trial) << k;
    EXPECT_EQ(resumed.runs[k].options, whole.runs[k].options) << k;
    EXPECT_EQ(resumed.runs[k].val_loss, whole.runs[k].val_loss) << k;
  }
  EXPECT_EQ(resumed.best->trial, whole.best->trial);

  // Another tune file for the same folder: refused, naming both.
  std::ofstream(dir_.file("other.json")) << R"({"hidden_size": [8, 32]})";
  o.tune_file = dir_.file("other.json");
  o.space = read_tune_file(o.tune_file);
  const auto message = test::message_thrown([&] { run_tune(o, quiet); });
  EXPECT_THAT(message, HasSubstr(dir_.file("other.json") + " ranges over"));
  EXPECT_THAT(message, HasSubstr("was started from " + dir_.file("space.json")));
}

TEST_F(Tune, ATimeBudgetEndsTheSearchAtTheFurthestRungAndALargerOneGoesOn) {
  TuneEvents quiet;
  auto o = options("budget");
  o.time_budget_seconds = 1e-9;  // spent by the first trial run
  const auto cut = run_tune(o, quiet);
  EXPECT_TRUE(cut.out_of_time);
  EXPECT_FALSE(cut.interrupted);
  ASSERT_EQ(cut.runs.size(), 1u);
  ASSERT_TRUE(cut.best.has_value());
  EXPECT_EQ(cut.best->trial, 0);
  EXPECT_EQ(cut.best->rung, 0);
  EXPECT_TRUE(fs::exists(cut.best_model));
  // The budget is no part of the search's identity: without one the search goes on to its end.
  o.time_budget_seconds = 0;
  const auto whole = run_tune(o, quiet);
  EXPECT_FALSE(whole.out_of_time);
  ASSERT_EQ(whole.runs.size(), 7u);
  EXPECT_EQ(whole.runs[0].val_loss, cut.runs[0].val_loss);
  ASSERT_TRUE(whole.best.has_value());
  EXPECT_EQ(whole.best->rung, 2);

  // Its report names the winner and draws every trial; a folder without a journal is refused.
  const auto page = infer::tune_report_html(o.output, "");
  const std::string winner = std::to_string(whole.best->trial);
  EXPECT_THAT(page, HasSubstr("<p>Trial " + winner + " at rung 2: "));
  EXPECT_THAT(page, HasSubstr("best: trial " + winner));
  EXPECT_THAT(page, HasSubstr("<tr><th>trial runs recorded</th><td>7</td></tr>"));
  EXPECT_THAT(page, ::testing::Not(HasSubstr("Learning-rate range test")));  // none was run here
  EXPECT_THAT(test::message_thrown([&] { infer::tune_report_html(dir_.file("nowhere"), ""); }),
              HasSubstr("not a search's folder (no journal.json)"));
}

TEST_F(Tune, RandomTrialsShareHalvingsBudget) {
  auto o = options("random");
  o.method = TuneMethod::Random;
  TuneEvents quiet;
  const auto outcome = run_tune(o, quiet);
  ASSERT_EQ(outcome.runs.size(), 4u);
  // Halving spends 4 x 1/4 + 2 x 1/2 + 1 = 3 budgets: 3/4 each of 4 random trials.
  for (const auto& run : outcome.runs) EXPECT_DOUBLE_EQ(run.budget, 0.75);
  ASSERT_TRUE(outcome.best.has_value());
  for (const auto& run : outcome.runs) EXPECT_LE(outcome.best->val_loss, run.val_loss);
}

TEST_F(Tune, TrialsOfEveryEncoderLengthTrainFromOneFeatureStore) {
  std::ofstream(dir_.file("lengths.json")) << R"({"encoder_length": [8, 12]})";
  auto o = options("lengths");
  o.tune_file = dir_.file("lengths.json");
  o.space = read_tune_file(o.tune_file);
  o.method = TuneMethod::Random;
  o.random_budget = 0.5;            // one epoch each
  o.objective = TuneObjective::Ic;  // scored again on validation after training: from the store too
  TuneEvents quiet;
  const auto outcome = run_tune(o, quiet);
  ASSERT_EQ(outcome.runs.size(), 4u);
  std::set<int64_t> lengths;
  for (const auto& run : outcome.runs) {
    lengths.insert(run.options.at("encoder_length").get<int64_t>());
    EXPECT_TRUE(std::isfinite(run.ic));
  }
  ASSERT_EQ(lengths, (std::set<int64_t>{8, 12}));
  // A single file's store is kept in the search's folder, one for both lengths and the scoring.
  int64_t stores = 0;
  for (const auto& entry : fs::directory_iterator(o.output / "features")) stores += entry.path().extension() == ".qtfs";
  EXPECT_EQ(stores, 1);
  // And it trains each trial as the file read into memory would, bit for bit.
  for (const auto& run : outcome.runs) {
    TrainingRequest request;
    request.source = o.source;
    request.source.in_memory = true;
    request.setup = apply_trial(o.base, run.options);
    request.setup.train.epochs = 1;
    TrainingEvents none;
    ProgressReporter silent;
    EXPECT_EQ(run_training(request, none, silent).result.best_val.loss, run.val_loss) << run.options.dump();
  }
}

TEST_F(Tune, RanksByTheValidationSplitsICOrCoverageWhenAsked) {
  TuneEvents quiet;
  for (auto objective : {TuneObjective::Ic, TuneObjective::Coverage}) {
    auto o = options(std::string("by-") + tune_objective_name(objective));
    o.trials = 2;
    o.objective = objective;
    const auto outcome = run_tune(o, quiet);
    ASSERT_EQ(outcome.runs.size(), 3u);
    for (const auto& run : outcome.runs) {
      ASSERT_TRUE(std::isfinite(run.objective));
      if (objective == TuneObjective::Ic) {
        EXPECT_EQ(run.objective, -run.ic);
      } else {
        EXPECT_DOUBLE_EQ(run.objective, std::abs(run.coverage - 0.8));
      }
    }
    // Rung 1 runs the trial whose rung-0 objective was lower.
    const auto& promoted = outcome.runs[0].objective <= outcome.runs[1].objective ? outcome.runs[0] : outcome.runs[1];
    EXPECT_EQ(outcome.runs[2].trial, promoted.trial);
  }
  EXPECT_THAT(test::message_thrown([] { parse_tune_objective("sharpe"); }),
              HasSubstr("--objective sharpe: use loss, ic or coverage"));
}

}  // namespace
}  // namespace qtft::train
