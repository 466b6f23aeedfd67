// train::run_training, the library's whole `qtft train`: the files it writes, the record a
// resume reads, and an interrupt saved resumably through the caller's save.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "qtft/artifact/model_file.h"
#include "qtft/common/error.h"
#include "qtft/train/run_record.h"
#include "qtft/train/run_training.h"
#include "support/bar_files.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/thrown.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

using ::testing::HasSubstr;

// Counts the events the leader reports.
struct CountingEvents : TrainingEvents {
  void data_ready(const data::Dataset&) override { ++data; }
  void calibration_finished(const model::TemporalFusionTransformer&, const data::RegimeCoverage&) override {
    ++calibrations;
  }
  int data = 0, calibrations = 0;
};

class RunTraining : public ::testing::Test {
 protected:
  TrainingRequest request() const {
    TrainingRequest r;
    r.source.csv_file = dir_.write("bars.csv", test::regular_bars_csv(300));
    r.setup.dataset.encoder_length = 12;
    r.setup.dataset.horizon = 3;
    r.setup.architecture.hidden_size = 8;
    r.setup.architecture.attention_heads = 2;
    r.setup.train = test::tiny_train_options();
    r.setup.train.epochs = 2;
    r.record.csv_file = r.source.csv_file;
    r.record.timestamp_unit = "ms";
    return r;
  }
  test::TempDir dir_;
};

TEST_F(RunTraining, WritesTheModelItsRecordAndTheMetricsDocument) {
  auto r = request();
  r.setup.qat.use_qat = true;
  r.setup.qat.calibration_batches = 2;
  r.save_model = dir_.file("model.safetensors");
  r.metrics_json = dir_.file("metrics.json");
  CountingEvents events;
  ProgressReporter progress;
  const auto outcome = run_training(r, events, progress);
  EXPECT_TRUE(outcome.leader);
  EXPECT_EQ(outcome.ranks, 1);
  EXPECT_FALSE(outcome.result.interrupted);
  EXPECT_EQ(outcome.saved_to, r.save_model);
  EXPECT_EQ(events.data, 1);
  EXPECT_EQ(events.calibrations, 1);
  ASSERT_TRUE(outcome.calibration_coverage);
  EXPECT_EQ(outcome.calibration_coverage->batches, 2);

  const auto file = artifact::load_model_file(r.save_model);
  ASSERT_TRUE(file.training);
  const auto record = run_record_from_json(file.training->run, "model.safetensors");
  EXPECT_EQ(record.save_model, std::filesystem::absolute(r.save_model).string());
  EXPECT_EQ(record.ranks, 1);
  EXPECT_EQ(record.csv_file, r.source.csv_file);
  EXPECT_EQ(record.timestamp_unit, "ms");

  const auto metrics = nlohmann::json::parse(test::read_text(r.metrics_json));
  EXPECT_EQ(metrics.at("best_epoch"), outcome.result.best_epoch);
  EXPECT_EQ(metrics.at("val_loss").get<double>(), outcome.result.best_val.loss);
  EXPECT_EQ(metrics.at("epochs").size(), 2u);
  EXPECT_EQ(metrics.at("calibration_coverage").at("batches"), 2);
}

TEST_F(RunTraining, AnInterruptSavesAResumableCheckpointThroughTheCallersSave) {
  auto r = request();
  r.save_model = dir_.file("ckpt.safetensors");
  int saves = 0;
  r.save = [&](const std::filesystem::path& path, const artifact::ModelFile& file) {
    ++saves;
    artifact::save_model_file(path, file);
  };
  int polls = 0;
  r.setup.stop_requested = [&] { return ++polls > 1; };
  r.metrics_json = dir_.file("interrupted_metrics.json");
  TrainingEvents events;
  ProgressReporter progress;
  const auto outcome = run_training(r, events, progress);
  EXPECT_TRUE(outcome.result.interrupted);
  EXPECT_EQ(saves, 1);
  EXPECT_EQ(outcome.saved_to, r.save_model);
  EXPECT_FALSE(std::filesystem::exists(r.metrics_json));  // no metrics document for a run that did not finish
  const auto file = artifact::load_model_file(r.save_model);
  ASSERT_TRUE(file.training);
  EXPECT_FALSE(file.training->finished);
}

TEST(RunRecord, RoundTripsAndReadsOldRecordsAndNamesTheFileWhenMalformed) {
  RunRecord r;
  r.save_model = "/m.safetensors";
  r.ranks = 2;
  r.parquet_file = "/bars";
  r.columns.close = "price";
  r.symbol = "ES";
  r.timestamp_unit = "s";
  r.feature_store = "/store";
  r.in_memory = true;
  const auto back = run_record_from_json(to_json(r), "f");
  EXPECT_EQ(to_json(back), to_json(r));
  // Written before feature stores: neither key.
  auto old = to_json(r);
  old["data"].erase("feature_store");
  old["data"].erase("in_memory");
  const auto read = run_record_from_json(old, "f");
  EXPECT_EQ(read.feature_store, "");
  EXPECT_FALSE(read.in_memory);
  auto bad = to_json(r);
  bad["data"]["csv_file"] = 3;
  EXPECT_THAT(test::message_thrown([&] { run_record_from_json(bad, "ckpt.safetensors"); }),
              HasSubstr("ckpt.safetensors: malformed record of the run to resume"));
}

}  // namespace
}  // namespace qtft::train
