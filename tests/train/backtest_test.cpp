// The walk-forward backtest: the flags' words, the folds planned over the data's clock and
// their refusals, each fold's forecasts out of sample, and a stopped backtest resumed that
// ends as the one never stopped.
#include "qtft/train/backtest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "qtft/artifact/model_file.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/backtest_forecasts.h"
#include "qtft/data/bars/bars.h"
#include "qtft/eval/conformal_walk.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"
#include "support/thrown.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

// folds.json as the backtest wrote it.
nlohmann::json record_of(const BacktestOutcome& outcome) {
  std::ifstream in(outcome.record);
  return nlohmann::json::parse(in);
}

using ::testing::HasSubstr;
namespace fs = std::filesystem;
constexpr int64_t kMinute = 60LL * 1'000'000'000;

// Each fold's share of forecasts.parquet's rows whose realized value lies inside the central
// interval of `values` (its lowest and highest levels' columns), as a fold's tally counts it.
std::vector<double> interval_shares(const data::BacktestForecasts& f, const std::vector<std::vector<double>>& values) {
  std::vector<double> inside, rows;
  for (size_t r = 0; r < f.rows(); ++r) {
    const auto k = static_cast<size_t>(f.fold[r]);
    if (k >= rows.size()) inside.resize(k + 1), rows.resize(k + 1);
    inside[k] += f.realized[r] >= values.front()[r] && f.realized[r] <= values.back()[r];
    rows[k] += 1;
  }
  for (size_t k = 0; k < rows.size(); ++k) inside[k] /= rows[k];
  return inside;
}

// forecasts.parquet of a conformal walk holds the quantiles as issued beside the model's,
// each set covering in each fold what the fold's tallies recorded (to one outcome: the
// file's values are in the target's units, the tallies' in the model's).
void expect_issued_quantiles_as_tallied(const BacktestOutcome& walk) {
  const auto f = data::read_backtest_forecasts(walk.forecasts.string());
  ASSERT_EQ(f.conformal.size(), f.quantiles.size());
  EXPECT_NE(f.conformal, f.value);
  const auto raw = interval_shares(f, f.value), issued = interval_shares(f, f.conformal);
  const auto folds = record_of(walk).at("folds");
  ASSERT_EQ(issued.size(), folds.size());
  for (size_t k = 0; k < folds.size(); ++k) {
    const auto& c = folds[k].at("conformal");
    const double one = 1.0 / c.at("raw").at("outcomes").get<double>();
    EXPECT_NEAR(raw[k], c.at("raw").at("interval_coverage").get<double>(), one) << k;
    EXPECT_NEAR(issued[k], c.at("conformal").at("interval_coverage").get<double>(), one) << k;
  }
}

TEST(FoldStep, ReadsBarsAndDurations) {
  EXPECT_EQ(parse_fold_step("500").bars, 500);
  EXPECT_EQ(parse_fold_step("500bars").bars, 500);
  EXPECT_EQ(parse_fold_step("30min").duration_ns, 30 * kMinute);
  EXPECT_EQ(parse_fold_step("12h").duration_ns, 12 * 60 * kMinute);
  EXPECT_EQ(parse_fold_step("5d").duration_ns, 5 * 1440 * kMinute);
  EXPECT_EQ(parse_fold_step("2w").duration_ns, 14 * 1440 * kMinute);
  EXPECT_EQ(describe_fold_step(parse_fold_step("36h")), "36h");
  EXPECT_EQ(describe_fold_step(parse_fold_step("48h")), "2d");
  for (const char* bad : {"", "0", "-5", "5x", "h", "5 d"}) {
    EXPECT_THAT(test::message_thrown([&] { parse_fold_step(bad); }), HasSubstr("--step " + std::string(bad) + ":"))
        << bad;
  }
  EXPECT_EQ(parse_refit("update"), Refit::Update);
  EXPECT_THAT(test::message_thrown([] { parse_refit("sometimes"); }), HasSubstr("--refit sometimes"));
}

// A clock of 100 bars at 0, 1, ..., 99 minutes.
std::vector<int64_t> minutes(int64_t n) {
  std::vector<int64_t> clock;
  for (int64_t i = 0; i < n; ++i) clock.push_back(i * kMinute);
  return clock;
}

FoldPlanOptions plan_of(int64_t initial_bars, const std::string& step) {
  FoldPlanOptions o;
  o.initial_train_bars = initial_bars;
  o.step = parse_fold_step(step);
  o.encoder_length = 10;
  o.horizon = 4;
  return o;
}

TEST(PlanFolds, StepsByBarsUntilNoWindowIsLeft) {
  const auto clock = minutes(100);
  // Trained through bar 39, then 59, 79; the last fold forecasts from 79 to the end.
  auto folds = plan_folds(clock, plan_of(40, "20"));
  ASSERT_EQ(folds.size(), 3u);
  EXPECT_EQ(folds[0].train_through_ns, 39 * kMinute);
  EXPECT_EQ(folds[0].forecast_until_ns, 59 * kMinute);
  EXPECT_EQ(folds[1].train_through_ns, 59 * kMinute);
  EXPECT_EQ(folds[2].train_through_ns, 79 * kMinute);
  EXPECT_EQ(folds[2].forecast_until_ns, 99 * kMinute);
  EXPECT_EQ(folds[2].bars, 20);
  // A step that runs past the end: the last fold takes what is left (bars 89..99).
  folds = plan_folds(clock, plan_of(40, "25"));
  ASSERT_EQ(folds.size(), 3u);
  EXPECT_EQ(folds[2].train_through_ns, 89 * kMinute);
  EXPECT_EQ(folds[2].forecast_until_ns, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(folds[2].bars, 11);
}

TEST(PlanFolds, StepsByDurationOnTheClockAndFromADate) {
  // Bars 0..49 minutes, then a gap, then 100..149.
  std::vector<int64_t> clock = minutes(50);
  for (int64_t i = 100; i < 150; ++i) clock.push_back(i * kMinute);
  FoldPlanOptions o = plan_of(0, "20min");
  o.initial_train_until_ns = 29 * kMinute + 30'000'000'000;  // between bars 29 and 30
  auto folds = plan_folds(clock, o);
  ASSERT_GE(folds.size(), 2u);
  EXPECT_EQ(folds[0].train_through_ns, 29 * kMinute);
  EXPECT_EQ(folds[0].forecast_until_ns, 49 * kMinute);
  // From bar 49, twenty and forty minutes reach no bar (the gap): that period joins the
  // next, through bar 109 (bars 49 and 100..108).
  ASSERT_EQ(folds.size(), 4u);
  EXPECT_EQ(folds[1].train_through_ns, 49 * kMinute);
  EXPECT_EQ(folds[1].forecast_until_ns, 109 * kMinute);
  EXPECT_EQ(folds[1].bars, 10);
  EXPECT_EQ(folds[2].forecast_until_ns, 129 * kMinute);
  EXPECT_EQ(folds[3].forecast_until_ns, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(folds[3].bars, 21);  // 129..149
  // Three minutes of one-minute bars are shorter than the horizon's four.
  o.step = parse_fold_step("3min");
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, o); }),
              HasSubstr("--step 3min: shorter than the horizon (4 bars of 1min)"));
}

// Encoder 10 + 77 new bars give 87 rows, whose newest 15% (87 - floor(73.95) = 14 rows) hold
// one window of 10 + 4; 76 new bars give 13.
TEST(PlanFolds, UnderUpdatesAStepGivesEachUpdateAWindowToValidateOn) {
  const auto clock = minutes(400);
  auto o = plan_of(40, "76");
  o.updates = true;
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, o); }),
              HasSubstr("--step 76: --refit update trains each fold on the bars since the last one and validates on "
                        "their newest 15%, which needs a window (encoder 10 + horizon 4): take a step of at least 77 "
                        "bars"));
  o.step = parse_fold_step("77");
  EXPECT_EQ(plan_folds(clock, o).size(), 5u);  // from bars 40, 117, 194, 271, 348
  o.updates = false;
  o.step = parse_fold_step("76");
  EXPECT_EQ(plan_folds(clock, o).size(), 5u);  // without updates, any step of the horizon or more
}

TEST(PlanFolds, RefusesWhatCannotBeWalkedNamingTheFlag) {
  const auto clock = minutes(100);
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, plan_of(40, "3")); }),
              HasSubstr("--step 3: shorter than the horizon (4 bars)"));
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, plan_of(101, "20")); }),
              HasSubstr("--initial-train-bars 101: beyond the data, which has 100 bars"));
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, plan_of(14, "20")); }),
              HasSubstr("--initial-train-bars 14: 14 bars, fewer than one window needs (15"));
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, plan_of(97, "20")); }),
              HasSubstr("--initial-train-bars 97: leaves 3 bars after it"));
  auto o = plan_of(0, "20");
  o.initial_train_until_ns = -kMinute;
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, o); }),
              HasSubstr("--initial-train-until 1969-12-31T23:59:00Z: before the data's first bar"));
  o.initial_train_bars = 40;
  EXPECT_THAT(test::message_thrown([&] { plan_folds(clock, o); }), HasSubstr("one of the two"));
}

// Two symbols of 600 bars; the first fold trains on 300, then steps of 100: 3 folds.
class Backtest : public ::testing::Test {
 protected:
  void SetUp() override {
    csv_ = dir_.file("bars.csv");
    data::write_bars_csv(test::regular_bar_set(600, 2), csv_);
  }
  BacktestOptions options(const std::string& folder) const {
    BacktestOptions o;
    o.source.csv_file = csv_;
    o.setup.dataset.encoder_length = 12;
    o.setup.dataset.horizon = 3;
    o.setup.architecture.hidden_size = 8;
    o.setup.architecture.attention_heads = 2;
    o.setup.train = test::tiny_train_options();
    o.setup.train.epochs = 1;
    o.plan.initial_train_bars = 300;
    o.plan.step = parse_fold_step("100");
    o.output = dir_.file(folder);
    return o;
  }
  test::TempDir dir_;
  std::string csv_;
};

// Stops the backtest once `after` folds are finished.
class StopAfter : public BacktestEvents {
 public:
  explicit StopAfter(int64_t after) : after_(after) {}
  void fold_finished(const FoldResult&, int64_t) override { ++finished_; }
  bool stop() const { return finished_ >= after_; }

 private:
  int64_t after_, finished_ = 0;
};

TEST_F(Backtest, ForecastsEachFoldsWindowsOutOfSampleAndRecordsTheFolds) {
  auto o = options("walk");
  BacktestEvents quiet;
  const auto outcome = run_backtest(o, quiet);
  ASSERT_EQ(outcome.planned_folds, 3);
  ASSERT_EQ(outcome.folds.size(), 3u);
  EXPECT_FALSE(outcome.interrupted);
  const auto forecasts = data::read_backtest_forecasts(outcome.forecasts.string());
  const auto doc = record_of(outcome);
  EXPECT_EQ(outcome.record, o.output / "folds.json");
  EXPECT_EQ(outcome.finished_folds, 3);
  EXPECT_TRUE(doc.value("complete", false));
  ASSERT_EQ(doc.at("folds").size(), 3u);
  size_t rows = 0;
  for (const auto& r : outcome.folds) {
    // Every window whose encoder ends in the fold's step: 100 per symbol, but in the last
    // fold bar 596 is the last with 3 bars after it (bars 499..596: 98 per symbol).
    const size_t expected = r.fold.index == 2 ? 2 * 98 : 2 * 100;
    EXPECT_EQ(static_cast<size_t>(r.desk.windows), expected) << r.fold.index;
    rows += expected * 3;
    EXPECT_EQ(r.training.kind, r.fold.index == 0 ? FoldModel::Trained : FoldModel::Updated);
    EXPECT_GE(r.training.epochs, 1);
    EXPECT_TRUE(std::isfinite(r.metrics.loss));
  }
  ASSERT_EQ(forecasts.rows(), rows);
  EXPECT_EQ(forecasts.quantiles, (std::vector<double>{0.1, 0.5, 0.9}));
  // Out of sample: every forecast bar comes after what its fold's model trained on, and
  // every origin lies in the fold's step.
  for (size_t i = 0; i < forecasts.rows(); ++i) {
    const auto& fold = outcome.folds.at(static_cast<size_t>(forecasts.fold[i])).fold;
    ASSERT_GT(forecasts.timestamp_ns[i], fold.train_through_ns) << i;
    ASSERT_GE(forecasts.origin_ns[i], fold.train_through_ns) << i;
    ASSERT_LT(forecasts.origin_ns[i], fold.forecast_until_ns) << i;
    ASSERT_EQ(forecasts.timestamp_ns[i] - forecasts.origin_ns[i], forecasts.step[i] * 5 * kMinute) << i;
  }
  EXPECT_EQ(doc.at("summary").at("folds"), 3);
  EXPECT_EQ(doc.at("summary").at("windows"), 2 * 100 + 2 * 100 + 2 * 98);
  // The typed summary is the one written.
  ASSERT_TRUE(outcome.summary.has_value());
  EXPECT_EQ(outcome.summary->windows, 2 * 100 + 2 * 100 + 2 * 98);
  EXPECT_EQ(to_json(*outcome.summary), doc.at("summary"));
  EXPECT_TRUE(outcome.summary->sharpe.is_signed);
  EXPECT_FALSE(outcome.summary->loss.is_signed);
  // Only the last model stays, and the per-fold parts are gone.
  EXPECT_FALSE(fs::exists(o.output / "models" / "fold-000.safetensors"));
  EXPECT_FALSE(fs::exists(o.output / "models" / "fold-001.safetensors"));
  EXPECT_TRUE(fs::exists(o.output / "models" / "fold-002.safetensors"));
  EXPECT_FALSE(fs::exists(o.output / "parts"));

  // Run again: everything is done, nothing changes.
  const auto again = run_backtest(o, quiet);
  EXPECT_EQ(again.resumed_folds, 3);
  EXPECT_TRUE(again.folds.empty());
  EXPECT_EQ(record_of(again).at("folds"), doc.at("folds"));
  EXPECT_EQ(again.finished_folds, 3);
}

TEST_F(Backtest, StoppedAfterAFoldResumesAndEndsAsTheOneNeverStopped) {
  BacktestEvents quiet;
  const auto whole = run_backtest(options("whole"), quiet);

  auto o = options("stopped");
  StopAfter events(1);
  o.setup.stop_requested = [&] { return events.stop(); };
  const auto stopped = run_backtest(o, events);
  ASSERT_TRUE(stopped.interrupted);
  EXPECT_EQ(record_of(stopped).at("folds").size(), 1u);
  EXPECT_EQ(stopped.finished_folds, 1);
  EXPECT_FALSE(fs::exists(o.output / "forecasts.parquet"));

  o.setup.stop_requested = {};
  // Stopped before its first fold finished: the folder is recorded, and resumes too.
  auto early = options("early");
  early.setup.stop_requested = [] { return true; };
  ASSERT_TRUE(run_backtest(early, quiet).interrupted);
  ASSERT_TRUE(fs::exists(early.output / "folds.json"));
  early.setup.stop_requested = {};
  const auto from_the_start = run_backtest(early, quiet);
  EXPECT_EQ(from_the_start.resumed_folds, 0);
  EXPECT_EQ(data::read_backtest_forecasts(from_the_start.forecasts.string()).value,
            data::read_backtest_forecasts(whole.forecasts.string()).value);

  const auto resumed = run_backtest(o, quiet);
  EXPECT_EQ(resumed.resumed_folds, 1);
  ASSERT_EQ(resumed.folds.size(), 2u);
  const auto a = data::read_backtest_forecasts(whole.forecasts.string());
  const auto b = data::read_backtest_forecasts(resumed.forecasts.string());
  ASSERT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.fold, b.fold);
  EXPECT_EQ(a.origin_ns, b.origin_ns);
  EXPECT_EQ(a.timestamp_ns, b.timestamp_ns);
  EXPECT_EQ(a.realized, b.realized);
  for (size_t q = 0; q < a.quantiles.size(); ++q) EXPECT_EQ(a.value[q], b.value[q]) << a.quantiles[q];
  EXPECT_TRUE(a.conformal.empty());  // no conformal method, no issued columns
  // The figures too, bar the clock's.
  for (size_t k = 0; k < 3; ++k) {
    auto x = record_of(whole).at("folds")[k], y = record_of(resumed).at("folds")[k];
    for (auto* j : {&x, &y}) {
      j->erase("seconds");
      j->erase("forecast_seconds");
      j->at("training").erase("seconds");
      for (auto& epoch : j->at("training").at("curve")) epoch.erase("seconds"), epoch.erase("samples_per_second");
    }
    EXPECT_EQ(x, y) << k;
  }
}

TEST_F(Backtest, AdaptiveConformalWalksOnAcrossFoldsAndAStopAndIsSavedWithTheModel) {
  BacktestEvents quiet;
  auto o = options("whole");
  o.adaptive_conformal_rate = 0.1;
  const auto whole = run_backtest(o, quiet);
  const auto doc = record_of(whole);
  ASSERT_EQ(doc.at("folds").size(), 3u);
  EXPECT_EQ(doc.at("options").at("conformal"), (nlohmann::json{{"method", "adaptive"}, {"rate", 0.1}}));
  for (const auto& fold : doc.at("folds")) {
    const auto& c = fold.at("conformal");
    // Every step of every window is tallied, raw and conformal alike.
    EXPECT_EQ(c.at("raw").at("outcomes"), fold.at("windows").get<int64_t>() * 3);
    EXPECT_EQ(c.at("conformal").at("outcomes"), c.at("raw").at("outcomes"));
    // The raw quantiles are the fold's own forecasts: their loss is its metrics' (float sums aside).
    const double loss = fold.at("metrics").at("in_target_units").at("loss").get<double>();
    EXPECT_NEAR(c.at("raw").at("loss_in_target_units").get<double>(), loss, 1e-5 * loss);
    EXPECT_NE(c.at("conformal").at("loss_in_target_units"), c.at("raw").at("loss_in_target_units"));
  }
  EXPECT_EQ(doc.at("summary").at("conformal_interval_coverage").at("folds"), 3);
  ASSERT_TRUE(whole.folds.back().conformal_coverage.has_value());
  expect_issued_quantiles_as_tallied(whole);
  // The last model carries the offsets the walk left, one set per symbol, as the record does.
  const auto model = artifact::load_model_file(o.output / "models" / "fold-002.safetensors");
  ASSERT_TRUE(model.conformal.has_value());
  EXPECT_EQ(model.conformal->method, "adaptive");
  EXPECT_EQ(model.conformal->offsets.size(), 2u);
  const auto walk = eval::AdaptiveConformalWalk::from_json(doc.at("conformal_state"));
  EXPECT_EQ(model.conformal->offsets, walk.offsets_by_symbol());

  // Stopped after fold 0 and resumed, it ends exactly as the walk never stopped.
  auto stopped = options("stopped");
  stopped.adaptive_conformal_rate = 0.1;
  StopAfter events(1);
  stopped.setup.stop_requested = [&] { return events.stop(); };
  ASSERT_TRUE(run_backtest(stopped, events).interrupted);
  stopped.setup.stop_requested = {};
  // Fold 0's part as a qtft before the issued columns wrote it: the walk goes on without
  // them, its parts still one table.
  const auto part0 = (stopped.output / "parts" / "fold-000.parquet").string();
  auto older = data::read_backtest_forecasts(part0);
  ASSERT_FALSE(older.conformal.empty());
  older.conformal.clear();
  data::write_backtest_forecasts(older, part0);
  const auto resumed_walk = run_backtest(stopped, quiet);
  EXPECT_TRUE(data::read_backtest_forecasts(resumed_walk.forecasts.string()).conformal.empty());
  const auto resumed = record_of(resumed_walk);
  EXPECT_EQ(resumed.at("conformal_state"), doc.at("conformal_state"));
  for (size_t k = 0; k < 3; ++k) {
    auto a = resumed.at("folds")[k].at("conformal"), b = doc.at("folds")[k].at("conformal");
    EXPECT_GT(a.at("seconds").get<double>(), 0.0);
    a.erase("seconds"), b.erase("seconds");  // the clock's
    EXPECT_EQ(a, b) << k;
  }

  // A walk without it is another backtest's folder; a rate out of range is refused.
  auto plain = options("stopped");
  EXPECT_THAT(test::message_thrown([&] { run_backtest(plain, quiet); }),
              HasSubstr("conformal: {\"method\":\"adaptive\",\"rate\":0.1} there, null here"));
  plain.adaptive_conformal_rate = 0.0;
  EXPECT_THAT(test::message_thrown([&] { run_backtest(plain, quiet); }),
              HasSubstr("--conformal-rate 0: must lie in (0, 1]"));
}

TEST_F(Backtest, SplitConformalIssuesEachFoldWithItsModelsValidationOffsets) {
  BacktestEvents quiet;
  auto o = options("split");
  o.split_conformal = true;
  const auto walk = run_backtest(o, quiet);
  const auto doc = record_of(walk);
  ASSERT_EQ(doc.at("folds").size(), 3u);
  EXPECT_EQ(doc.at("options").at("conformal"), (nlohmann::json{{"method", "split"}}));
  double raw_miss = 0, conformal_miss = 0;  // distance from the nominal 0.8, summed over folds
  for (const auto& fold : doc.at("folds")) {
    const auto& c = fold.at("conformal");
    EXPECT_EQ(c.at("method"), "split");
    EXPECT_GT(c.at("calibration_windows").get<int64_t>(), 0);
    EXPECT_EQ(c.at("raw").at("outcomes"), fold.at("windows").get<int64_t>() * 3);
    EXPECT_EQ(c.at("conformal").at("outcomes"), c.at("raw").at("outcomes"));
    const double loss = fold.at("metrics").at("in_target_units").at("loss").get<double>();
    EXPECT_NEAR(c.at("raw").at("loss_in_target_units").get<double>(), loss, 1e-5 * loss);
    raw_miss += std::abs(c.at("raw").at("interval_coverage").get<double>() - 0.8);
    conformal_miss += std::abs(c.at("conformal").at("interval_coverage").get<double>() - 0.8);
  }
  // This barely trained model's own intervals miss; offsets from validation bring them closer.
  EXPECT_LT(conformal_miss, raw_miss);
  expect_issued_quantiles_as_tallied(walk);
  // The last fold's model fitted the offsets it was scored with, on its own validation split.
  const auto model = artifact::load_model_file(o.output / "models" / "fold-002.safetensors");
  ASSERT_TRUE(model.conformal.has_value());
  EXPECT_EQ(model.conformal->method, "split");
  EXPECT_EQ(model.conformal->calibration_windows, doc.at("folds")[2].at("conformal").at("calibration_windows"));
  EXPECT_EQ(walk.folds.back().conformal_method, "split");

  // Another method on the same folder is another backtest; both at once are refused.
  auto adaptive = options("split");
  adaptive.adaptive_conformal_rate = 0.2;
  EXPECT_THAT(test::message_thrown([&] { run_backtest(adaptive, quiet); }),
              HasSubstr("(conformal.method: \"split\" there, \"adaptive\" here)"));
  adaptive.split_conformal = true;
  EXPECT_THAT(test::message_thrown([&] { run_backtest(adaptive, quiet); }),
              HasSubstr("--conformal: split or adaptive, not both"));
}

TEST_F(Backtest, RefusesOtherOptionsOnResumeAndAFolderThatIsNotABacktests) {
  auto o = options("walk");
  StopAfter events(1);
  o.setup.stop_requested = [&] { return events.stop(); };
  ASSERT_TRUE(run_backtest(o, events).interrupted);
  o.setup.stop_requested = {};
  o.refit = Refit::Full;
  BacktestEvents quiet;
  EXPECT_THAT(test::message_thrown([&] { run_backtest(o, quiet); }),
              HasSubstr("holds a backtest with other options (refit: \"update\" there, \"full\" here)"));
  o = options("walk");
  o.plan.step = parse_fold_step("150");
  EXPECT_THAT(test::message_thrown([&] { run_backtest(o, quiet); }),
              HasSubstr("plan.step: \"100 bars\" there, \"150 bars\" here"));

  auto other = options("other");
  fs::create_directories(other.output);
  std::ofstream(other.output / "notes.txt") << "mine";
  EXPECT_THAT(test::message_thrown([&] { run_backtest(other, quiet); }),
              HasSubstr("holds files but no folds.json, so it is not a backtest's output"));
  other.output = dir_.file("new");
  other.cost_bps = -1;
  EXPECT_THAT(test::message_thrown([&] { run_backtest(other, quiet); }), HasSubstr("--cost-bps -1"));
  other.cost_bps = 0;
  other.int8 = true;
  EXPECT_THAT(test::message_thrown([&] { run_backtest(other, quiet); }), HasSubstr("--int8"));
  EXPECT_FALSE(fs::exists(other.output));  // nothing written for bad options
}

TEST_F(Backtest, RefusesASymbolListedAfterTheFirstFoldAndBarsAddedToAFinishedWalk) {
  auto bars = test::regular_bar_set(600, 2);
  bars.series[1] = data::slice_bars(bars.series[1], 400, 600);
  data::write_bars_csv(bars, csv_);
  BacktestEvents quiet;
  auto o = options("late");
  EXPECT_THAT(test::message_thrown([&] { run_backtest(o, quiet); }),
              HasSubstr("--initial-train-bars: the first fold trains through"));
  EXPECT_FALSE(fs::exists(o.output));

  // A finished walk, then more bars: its folds' dates no longer hold.
  data::write_bars_csv(test::regular_bar_set(600, 2), csv_);
  o = options("grown");
  ASSERT_FALSE(run_backtest(o, quiet).interrupted);
  data::write_bars_csv(test::regular_bar_set(700, 2), csv_);
  EXPECT_THAT(test::message_thrown([&] { run_backtest(o, quiet); }),
              HasSubstr("the data changed since the backtest began"));
}

TEST_F(Backtest, RefitNoneKeepsTheFirstModelAndKeepModelsKeepsEvery) {
  auto o = options("none");
  o.refit = Refit::None;
  BacktestEvents quiet;
  const auto none = run_backtest(o, quiet);
  ASSERT_EQ(none.folds.size(), 3u);
  EXPECT_EQ(none.folds[1].training.kind, FoldModel::Kept);
  EXPECT_EQ(none.folds[2].training.kind, FoldModel::Kept);
  EXPECT_STREQ(fold_model_name(FoldModel::Kept), "none");
  EXPECT_TRUE(fs::exists(o.output / "models" / "fold-000.safetensors"));
  // The first fold is the same model on the same windows whatever the refit.
  auto u = options("kept");
  u.keep_models = true;
  const auto update = run_backtest(u, quiet);
  EXPECT_EQ(update.folds[0].metrics.loss, none.folds[0].metrics.loss);
  EXPECT_NE(update.folds[2].metrics.loss, none.folds[2].metrics.loss);
  for (const char* name : {"fold-000.safetensors", "fold-001.safetensors", "fold-002.safetensors"}) {
    EXPECT_TRUE(fs::exists(u.output / "models" / name)) << name;
  }
}

}  // namespace
TEST(BacktestSummary, FiguresAcrossTheFoldsWhereTheyAreFinite) {
  auto fold = [](double loss, double ic, int64_t windows) {
    return nlohmann::json{{"windows", windows},
                          {"forecast_seconds", 0.5},
                          {"training", {{"seconds", 2.0}}},
                          {"metrics", {{"loss", loss}}},
                          {"desk", {{"ic_pooled", {{{"ic", ic}}}}}}};
  };
  auto folds =
      nlohmann::json::array({fold(1.0, 0.5, 10), fold(3.0, -0.25, 20), fold(2.0, 0.25, 30), fold(2.0, 0.5, 40)});
  folds[2]["metrics"]["loss"] = nullptr;  // a fold without the figure does not count
  folds[3]["metrics"]["loss"] = "n/a";
  const auto s = summarize_folds(folds);
  EXPECT_EQ(s.folds, 4);
  EXPECT_EQ(s.windows, 100);
  EXPECT_EQ(s.train_seconds, 8.0);
  EXPECT_EQ(s.forecast_seconds, 2.0);
  EXPECT_EQ(s.loss.folds, 2);
  EXPECT_EQ(s.loss.mean, 2.0);
  EXPECT_EQ(s.loss.sd, std::sqrt(2.0));  // sample sd of 1 and 3
  EXPECT_FALSE(s.loss.is_signed);
  EXPECT_EQ(s.ic_step1.folds, 4);
  EXPECT_EQ(s.ic_step1.positive_folds, 3);
  EXPECT_TRUE(s.ic_step1.is_signed);
  EXPECT_EQ(s.ic_step1.mean, 0.25);
  EXPECT_EQ(s.ic_step1.sd, std::sqrt(0.125));      // squares 0.375 over 3
  EXPECT_DOUBLE_EQ(s.ic_step1.t, std::sqrt(2.0));  // 0.25 / (sd / 2)
  EXPECT_TRUE(std::isnan(s.sharpe.mean));          // no fold has it
  EXPECT_EQ(s.sharpe.folds, 0);
  const auto json = to_json(s);
  EXPECT_TRUE(json.at("sharpe").at("mean").is_null());
  EXPECT_TRUE(json.at("sharpe").at("t").is_null());
  EXPECT_FALSE(json.at("loss").contains("t"));
}

}  // namespace qtft::train
