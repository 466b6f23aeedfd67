// `qtft train --update`: the bars an update selects, the lineage a model file records, the
// refusals, and an update stopped and resumed that ends as the one never stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "memory/bitwise.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/detail/fingerprint.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/parquet_dataset.h"
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

// A folder of two files, both symbols in each, split at bar 55: an update's history may
// straddle them.
data::BarSource folder_of(const data::BarSet& bars, const test::TempDir& dir) {
  const auto half = [&](size_t begin, size_t end) {
    data::BarSet part = bars;
    for (auto& s : part.series) s = data::slice_bars(s, begin, end);
    return part;
  };
  std::filesystem::create_directories(dir.path() / "bars");
  data::write_bars_parquet(half(0, 55), dir.file("bars/a-0.parquet"));
  data::write_bars_parquet(half(55, 100), dir.file("bars/a-1.parquet"));
  data::BarSource source;
  source.parquet_file = dir.file("bars");
  return source;
}

// Two series of 100 bars in a folder of two files (folder_of).
class BarsAfterInAFolder : public ::testing::Test {
 protected:
  test::TempDir dir;
  const data::BarSet bars = test::regular_bar_set(100, 2);
  const data::BarSource source = folder_of(bars, dir);
  const data::BarSeries& s0 = bars.series[0];
  const data::BarSeries& s1 = bars.series[1];
};

TEST_F(BarsAfterInAFolder, FoundAPartAtATimeAsInMemory) {
  for (const auto& [mark0, mark1] : {std::pair{59, 99}, std::pair{3, 50}, std::pair{54, 55}}) {
    const std::vector<artifact::SeriesMark> seen{{"S0", s0.timestamp_ns[mark0], s0.close[mark0]},
                                                 {"S1", s1.timestamp_ns[mark1], s1.close[mark1]}};
    const auto in_memory = bars_after(data::load_bars(source), seen, 11);
    const auto found = find_bars_after(source, seen, 11);
    ASSERT_TRUE(found);
    ASSERT_EQ(found->from_ns.size(), in_memory.bars.series.size());
    for (size_t i = 0; i < found->from_ns.size(); ++i) {
      const auto& kept = in_memory.bars.series[i];
      EXPECT_EQ(found->from_ns[i], std::pair(kept.symbol, kept.timestamp_ns.front())) << mark0 << " " << mark1;
      EXPECT_EQ(found->added[i].symbol, in_memory.added[i].symbol);
      EXPECT_EQ(found->added[i].first_bar_ns, in_memory.added[i].first_bar_ns);
      EXPECT_EQ(found->added[i].last_bar_ns, in_memory.added[i].last_bar_ns);
      const auto& ts = kept.timestamp_ns;
      EXPECT_EQ(found->new_bars[i], ts.end() - std::upper_bound(ts.begin(), ts.end(), seen[i].bar_ns));
    }
    // The source cut as found holds the bars bars_after selects, and no other.
    auto cut = source;
    cut.series_from_ns = found->from_ns;
    const auto selected = data::load_bars(cut);
    ASSERT_EQ(selected.series.size(), in_memory.bars.series.size());
    for (size_t i = 0; i < selected.series.size(); ++i) {
      EXPECT_EQ(selected.series[i].timestamp_ns, in_memory.bars.series[i].timestamp_ns);
      EXPECT_EQ(selected.series[i].close, in_memory.bars.series[i].close);
    }
  }
}

TEST_F(BarsAfterInAFolder, FoundAPartAtATimeRefusesAsInMemoryWordForWord) {
  const std::vector<artifact::SeriesMark> seen{{"S0", s0.timestamp_ns[50], s0.close[50]},
                                               {"S1", s1.timestamp_ns[50], s1.close[50]}};
  auto unknown = seen, missing = seen, other_close = seen, all_seen = seen;
  unknown[1].symbol = "ES";
  missing[0].bar_ns += 1;
  other_close[1].close += 0.5;
  all_seen[0] = {"S0", s0.timestamp_ns[99], s0.close[99]};
  all_seen[1] = {"S1", s1.timestamp_ns[99], s1.close[99]};
  for (const auto& marks : {unknown, missing, other_close, all_seen}) {
    const auto expected = test::message_thrown([&] { bars_after(data::load_bars(source), marks, 5); });
    EXPECT_FALSE(expected.empty());
    EXPECT_EQ(test::message_thrown([&] { find_bars_after(source, marks, 5); }), expected);
  }
  // A sole series under another name: bars_after renames it, so the caller reads in memory.
  data::BarSet one = bars;
  one.series.resize(1);
  one.series[0].symbol = "recent";
  data::write_bars_parquet(one, dir.file("one.parquet"));
  data::BarSource file;
  file.parquet_file = dir.file("one.parquet");
  EXPECT_FALSE(find_bars_after(file, {seen[0]}, 5));
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
    return run_on(source, std::move(setup), stop);
  }
  Outcome run_on(const data::BarSource& source, TrainingSetup setup, const std::function<bool()>& stop = {}) {
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

// Over a folder with a feature store, the update reads the folder a part at a time and
// trains from a store of its own bars (removed when it is done): bit for bit the update in
// memory.
TEST_F(Update, OverAFolderTrainsFromAStoreOfItsOwnBarsAsInMemory) {
  data::BarSource csv;
  csv.csv_file = all_;
  const std::string folder = dir_.file("all");
  ASSERT_GT(data::write_parquet_partitions(data::load_bars(csv), folder), 0u);
  data::BarSource stored;
  stored.parquet_file = folder;
  auto in_memory = stored;
  in_memory.in_memory = true;

  TrainingEvents events;
  auto prepared = prepare_training(stored, update_setup(), events);
  ASSERT_TRUE(prepared.update_store);
  const std::string store = prepared.update_store->path;
  EXPECT_TRUE(std::filesystem::exists(store));
  EXPECT_EQ(std::filesystem::path(store).parent_path(), std::filesystem::path(folder) / "_qtft_store");
  // The update's bars alone: 13 of history and 450 new give 462 rows.
  EXPECT_EQ(prepared.dataset->series()[0].timestamp_ns.size(), 462u);
  ProgressReporter quiet;
  fit_training(prepared, quiet, events);
  const auto from_store = training_model_file(prepared);
  prepared = PreparedTraining{};
  EXPECT_FALSE(std::filesystem::exists(store));

  const auto from_memory = run_on(in_memory, update_setup()).file;
  ASSERT_EQ(from_store.weights.size(), from_memory.weights.size());
  for (size_t i = 0; i < from_memory.weights.size(); ++i) {
    EXPECT_TRUE(test::bitwise_equal(from_store.weights[i].second, from_memory.weights[i].second))
        << from_memory.weights[i].first;
  }
  EXPECT_EQ(from_store.lineage->trained_through.at(0).bar_ns, from_memory.lineage->trained_through.at(0).bar_ns);
  EXPECT_EQ(from_store.lineage->added.at(0).first_bar_ns, from_memory.lineage->added.at(0).first_bar_ns);
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
