// `qtft train --update`: the bars an update selects, the lineage a model file records, the
// refusals, and an update stopped and resumed that ends as the one never stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "memory/bitwise.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/detail/fingerprint.h"
#include "qtft/common/error.h"
#include "qtft/quant/observers.h"
#include "qtft/train/detail/update.h"
#include "qtft/train/workflow.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"
#include "support/thrown.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

using ::testing::HasSubstr;
const c10::Device kCpu(c10::kCPU);

TEST(BarsAfter, KeepsTheEncodersHistoryAndEveryNewBar) {
  const auto bars = test::regular_bar_set(100, 2);  // S0, S1
  const auto& s0 = bars.series[0];
  std::vector<artifact::SeriesMark> seen{{"S0", s0.timestamp_ns[59], s0.close[59]},
                                         {"S1", bars.series[1].timestamp_ns[99], bars.series[1].close[99]}};
  auto update = bars_after(bars, seen, 11);
  ASSERT_EQ(update.bars.series.size(), 1u);  // S1 has nothing new
  const auto& kept = update.bars.series[0];
  EXPECT_EQ(kept.symbol, "S0");
  ASSERT_EQ(kept.size(), 11u + 40u);  // bars 49..59 (the last one trained on included), then 60..99
  EXPECT_EQ(kept.timestamp_ns.front(), s0.timestamp_ns[49]);
  EXPECT_EQ(kept.close.back(), s0.close[99]);
  ASSERT_EQ(update.added.size(), 1u);
  EXPECT_EQ(update.added[0].first_bar_ns, s0.timestamp_ns[60]);
  EXPECT_EQ(update.added[0].last_bar_ns, s0.timestamp_ns[99]);
  // Less history than asked for: what there is.
  seen[0].bar_ns = s0.timestamp_ns[3];
  seen[0].close = s0.close[3];
  EXPECT_EQ(bars_after(bars, seen, 11).bars.series[0].size(), 100u);
}

TEST(BarsAfter, RefusesBarsThatDoNotContinueTheModelsNamingSymbolAndBar) {
  const auto bars = test::regular_bar_set(100, 2);
  const auto& s0 = bars.series[0];
  const auto& s1 = bars.series[1];
  std::vector<artifact::SeriesMark> seen{{"S0", s0.timestamp_ns[50], s0.close[50]},
                                         {"S1", s1.timestamp_ns[50], s1.close[50]}};
  auto unknown = seen;
  unknown[1].symbol = "ES";
  EXPECT_THAT(test::message_thrown([&] { bars_after(bars, unknown, 5); }),
              HasSubstr("test bars: symbol 'S1' is not one the model has trained on (it knows S0, ES)"));
  auto missing = seen;
  missing[0].bar_ns += 1;  // between two bars
  EXPECT_THAT(test::message_thrown([&] { bars_after(bars, missing, 5); }),
              HasSubstr("test bars: symbol 'S0' has no bar at 2024-01-02T12:40:00.000000001Z, the last bar the model "
                        "trained on (its bars run from 2024-01-02T08:30:00Z to 2024-01-02T16:45:00Z)"));
  auto other_close = seen;
  other_close[1].close += 0.5;
  EXPECT_THAT(test::message_thrown([&] { bars_after(bars, other_close, 5); }),
              HasSubstr("symbol 'S1' at 2024-01-02T12:40:00Z: the model trained on close"));
  EXPECT_THAT(test::message_thrown([&] { bars_after(bars, other_close, 5); }), HasSubstr("overlap inconsistently"));
  auto all_seen = seen;
  all_seen[0] = {"S0", s0.timestamp_ns[99], s0.close[99]};
  all_seen[1] = {"S1", s1.timestamp_ns[99], s1.close[99]};
  EXPECT_THAT(test::message_thrown([&] { bars_after(bars, all_seen, 5); }), HasSubstr("--update has nothing to learn"));
  // The sole series of a file continues a one-series model under any name.
  data::BarSet one = bars;
  one.series.resize(1);
  one.series[0].symbol = "recent";
  auto update = bars_after(one, {seen[0]}, 5);
  EXPECT_EQ(update.bars.series[0].symbol, "S0");
}

// A QAT model trained on the first 500 bars of a CSV, updated on a file of 800 that
// continues them.
class Update : public ::testing::Test {
 protected:
  void SetUp() override {
    old_ = dir_.file("old.csv");
    all_ = dir_.file("all.csv");
    std::ofstream(old_) << test::regular_bars_csv(500);
    std::ofstream(all_) << test::regular_bars_csv(800);
    TrainingSetup setup = base_setup();
    setup.qat.use_qat = true;
    setup.qat.calibration_batches = 2;
    data::BarSource source;
    source.csv_file = old_;
    TrainingEvents events;
    auto run = prepare_training(source, setup, events);
    ProgressReporter quiet;
    fit_training(run, quiet, events);
    parent_ = dir_.file("parent.safetensors");
    artifact::save_model_file(parent_, training_model_file(run));
  }
  TrainingSetup base_setup() const {
    TrainingSetup setup;
    setup.dataset.encoder_length = 12;
    setup.dataset.horizon = 3;
    setup.architecture.hidden_size = 8;
    setup.architecture.attention_heads = 2;
    setup.train = test::tiny_train_options();
    setup.train.epochs = 2;
    return setup;
  }
  TrainingSetup update_setup() const {
    auto setup = base_setup();
    setup.load_model = parent_;
    setup.update = true;
    return setup;
  }
  struct Outcome {
    TrainResult result;
    artifact::ModelFile file;
    std::shared_ptr<const data::Dataset> dataset;
  };
  Outcome run(TrainingSetup setup, const std::function<bool()>& stop = {}) {
    data::BarSource source;
    source.csv_file = all_;
    TrainingEvents events;
    auto prepared = prepare_training(source, std::move(setup), events);
    ProgressReporter quiet;
    auto result = fit_training(prepared, quiet, events, stop);
    return {result, training_model_file(prepared), prepared.dataset};
  }

  test::TempDir dir_;
  std::string old_, all_, parent_;
};

TEST_F(Update, TrainsOnlyOnTheNewBarsAndRecordsWhereItCameFrom) {
  const auto parent = artifact::load_model_file(parent_);
  ASSERT_TRUE(parent.lineage);
  ASSERT_EQ(parent.lineage->trained_through.size(), 1u);
  const auto mark = parent.lineage->trained_through[0];
  // 500 bars give 499 rows; the first 70% (349) train: the last is bar 349, close 449.
  EXPECT_EQ(mark.close, 449.0);
  EXPECT_TRUE(parent.lineage->parent.empty());

  auto updated = run(update_setup());
  // The first training window's encoder ends at the parent's last bar; its targets are new.
  const auto& series = updated.dataset->series()[0];
  EXPECT_EQ(series.timestamp_ns[11], mark.bar_ns);
  EXPECT_GT(series.timestamp_ns[12], mark.bar_ns);
  EXPECT_EQ(updated.dataset->num_windows(data::Split::Test), 0u);
  ASSERT_TRUE(updated.file.lineage);
  const auto& lineage = *updated.file.lineage;
  EXPECT_EQ(lineage.parent, "parent.safetensors fnv1a64:" + file_fingerprint(parent_));
  ASSERT_EQ(lineage.added.size(), 1u);
  EXPECT_EQ(lineage.added[0].first_bar_ns, mark.bar_ns + 300LL * 1'000'000'000);
  // The update's own training split: bars 337..799 (13 of history, 450 new) give 462 rows,
  // of which the first 85% (392) train: the last is bar 337 + 392, close 100 + 729.
  const auto last = lineage.trained_through.at(0);
  EXPECT_EQ(lineage.added[0].last_bar_ns, last.bar_ns);
  EXPECT_EQ(last.close, 829.0);
  EXPECT_EQ(updated.file.dataset.test_fraction, parent.dataset.test_fraction);  // the model's windows kept
  // Observers live, continuing the parent's counts.
  auto before = quant::observer_stats(*artifact::model_from_file(parent, "parent", kCpu).model);
  auto after = quant::observer_stats(*artifact::model_from_file(updated.file, "updated", kCpu).model);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_FALSE(after[i].frozen);
    EXPECT_GT(after[i].samples, before[i].samples) << after[i].name;
  }
}

TEST_F(Update, StoppedAndResumedEndsAsTheUpdateNeverStopped) {
  const auto whole = run(update_setup()).file;
  int polls = 0;
  auto stopped = run(update_setup(), [&] { return ++polls >= 4; });
  ASSERT_TRUE(stopped.result.interrupted);
  const auto checkpoint = dir_.file("stopped.safetensors");
  artifact::save_model_file(checkpoint, stopped.file);
  auto setup = base_setup();
  setup.load_model = checkpoint;
  setup.resume = true;
  auto resumed = run(setup).file;
  ASSERT_EQ(resumed.weights.size(), whole.weights.size());
  for (size_t i = 0; i < whole.weights.size(); ++i) {
    EXPECT_TRUE(test::bitwise_equal(resumed.weights[i].second, whole.weights[i].second)) << whole.weights[i].first;
  }
  EXPECT_EQ(resumed.lineage->trained_through.at(0).bar_ns, whole.lineage->trained_through.at(0).bar_ns);
  EXPECT_EQ(resumed.lineage->parent, whole.lineage->parent);
}

TEST_F(Update, RefusesTooFewNewBarsAModelWithoutLineageAndConflictingFlags) {
  std::ofstream(all_) << test::regular_bars_csv(360);  // 10 bars past the parent's last
  EXPECT_THAT(test::message_thrown([&] { run(update_setup()); }), HasSubstr("--update: too few new bars (ES 10)"));

  auto file = artifact::load_model_file(parent_);
  file.lineage.reset();
  artifact::save_model_file(parent_, file);
  EXPECT_THAT(test::message_thrown([&] { run(update_setup()); }),
              HasSubstr("parent.safetensors: records no bars it trained on"));

  auto setup = update_setup();
  setup.qat.two_phase = true;
  EXPECT_THROW(check_training_setup(setup), UsageError);
  setup = update_setup();
  setup.load_model.clear();
  EXPECT_THROW(check_training_setup(setup), UsageError);
}

}  // namespace
}  // namespace qtft::train
