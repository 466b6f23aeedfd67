// The QAT workflow as users run it: calibrate (phase 1), train frozen (phase 2), the
// two-phase flag, PTQ with `qtft quantize`, and the accuracy comparison.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/quant/observers.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;

const std::string kSmall =
    " --hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4 --max-batches-per-epoch 3 --batch-size 16";

class QatCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("bars.parquet");
    ASSERT_EQ(run_qtft(dir_, "make-data --output " + data_ + " --rows 2400 --symbols 2").exit_code, 0);
  }
  test::CliRun train(const std::string& args) {
    auto run = run_qtft(dir_, "train --parquet-file " + data_ + " " + args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return run;
  }
  std::vector<quant::ObserverStats> observers(const std::string& path) {
    auto loaded = artifact::load_model(path, c10::Device(c10::kCPU));
    return quant::observer_stats(*loaded.model);
  }
  test::TempDir dir_;
  std::string data_;
};

TEST_F(QatCli, PhaseOneCalibratesThenPhaseTwoTrainsWithFrozenObservers) {
  auto calibrated = dir_.file("calibrated.safetensors");
  auto metrics = dir_.file("metrics.json");
  auto run = train("--use-qat --qat-calibration-batches 5 --epochs 1 --save-model " + calibrated + " --metrics-json " +
                   metrics + kSmall);
  EXPECT_THAT(run.out,
              HasSubstr("Starting QAT calibration (5 batches)...\nCalibration complete\nObserver statistics:\n"));
  // Which regimes the 5 batches of 16 windows covered, and that 5 is under the checklist's 100.
  EXPECT_THAT(run.out, HasSubstr("Calibration coverage: 80 windows in 5 batches"));
  EXPECT_THAT(run.out, HasSubstr("WARNING few: 5 calibration batches, under the 100"));
  auto coverage = nlohmann::json::parse(std::ifstream(metrics)).at("calibration_coverage");
  EXPECT_EQ(coverage.at("calibration_windows"), 80);
  size_t covered = 0;
  for (const auto& t : coverage.at("volatility").at("terciles")) covered += t.at("calibration_windows").get<size_t>();
  EXPECT_EQ(covered, 80u);
  EXPECT_THAT(run.out, ::testing::ContainsRegex("  [a-z_.0-9]+: scale=[0-9.]+, zero_point=[0-9]+, samples=5\n"));
  for (const auto& s : observers(calibrated)) {
    EXPECT_EQ(s.samples, 5 + 3) << s.name;  // calibration plus three training steps
    EXPECT_FALSE(s.frozen);
  }

  auto final_model = dir_.file("final.safetensors");
  run = train("--use-qat --load-model " + calibrated + " --freeze-qat-observers --epochs 2 --batch-size 32" +
              " --max-batches-per-epoch 3 --save-model " + final_model);
  EXPECT_THAT(run.out, HasSubstr("QAT observers frozen"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("Starting QAT calibration")));
  auto before = observers(calibrated), after = observers(final_model);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(after[i].frozen);
    EXPECT_EQ(after[i].scale, before[i].scale) << after[i].name;
    EXPECT_EQ(after[i].zero_point, before[i].zero_point) << after[i].name;
    EXPECT_EQ(after[i].samples, before[i].samples) << after[i].name;
  }
  run = run_qtft(dir_, "inspect " + final_model);
  EXPECT_THAT(run.out, HasSubstr("QAT observers (" + std::to_string(after.size()) + "):"));
}

TEST_F(QatCli, TwoPhaseTrainsFp32ThenFineTunesAndFreezesAfterTheLiveEpochs) {
  auto model = dir_.file("two_phase.safetensors");
  auto run =
      train("--two-phase --qat-live-epochs 1 --qat-calibration-batches 2 --epochs 3 --save-model " + model + kSmall);
  // One live epoch leaves a frozen one: 1 epoch FP32, 2 of QAT.
  EXPECT_THAT(run.out, HasSubstr("Two-phase QAT from FP32: 1 epoch FP32, then 2 epochs of QAT fine-tuning (8-bit "
                                 "weights, 8-bit activations) at learning rate 0.001, observers calibrated on the "
                                 "trained model over 2 batches, live for 1 epoch, then frozen\n"));
  EXPECT_THAT(run.out, HasSubstr("FP32 phase done (best epoch 1); QAT phase:"));
  EXPECT_THAT(run.out, HasSubstr("epoch 3/3"));
  for (const auto& s : observers(model)) {
    EXPECT_TRUE(s.frozen) << s.name;
    EXPECT_EQ(s.samples, 2 + 3) << s.name;  // calibration plus the first QAT epoch's steps only
  }
  // From scratch, as before: the observers live for epoch 1 of 2.
  auto scratch = dir_.file("scratch.safetensors");
  run =
      train("--two-phase --qat-start scratch --qat-calibration-batches 2 --epochs 2 --save-model " + scratch + kSmall);
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("Two-phase QAT from FP32")));
  for (const auto& s : observers(scratch)) EXPECT_EQ(s.samples, 2 + 3) << s.name;

  run = run_qtft(dir_, "train --two-phase --epochs 1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--two-phase trains FP32, then fine-tunes with QAT: it needs --epochs 2 or more"));
  run = run_qtft(dir_, "train --two-phase --epochs 4 --qat-epochs 4");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--qat-epochs must be between 1 and --epochs - 1 (3), got 4"));
}

TEST_F(QatCli, TwoPhaseFromALoadedFp32ModelFineTunesEveryEpoch) {
  auto fp32 = dir_.file("fp32.safetensors");
  train("--epochs 1 --save-model " + fp32 + kSmall);
  auto qat = dir_.file("qat.safetensors");
  auto run =
      train("--two-phase --load-model " + fp32 +
            " --qat-calibration-batches 2 --epochs 2 --max-batches-per-epoch 3 --batch-size 16 --save-model " + qat);
  EXPECT_THAT(run.out, HasSubstr("Two-phase QAT from FP32: the loaded FP32 model, then 2 epochs of QAT fine-tuning"));
  EXPECT_THAT(run.out, HasSubstr("Starting QAT calibration (2 batches)"));
  for (const auto& s : observers(qat)) {
    EXPECT_TRUE(s.frozen) << s.name;
    EXPECT_EQ(s.samples, 2 + 3) << s.name;  // live for 1 of the 2 epochs
  }
  // The fine-tuning's rate: --qat-lr-scale of --learning-rate.
  run = train("--two-phase --load-model " + fp32 +
              " --qat-lr-scale 0.5 --qat-calibration-batches 2 --epochs 1 "
              "--max-batches-per-epoch 3 --batch-size 16 --save-model " +
              qat);
  EXPECT_EQ(artifact::load_model_file(qat).training->config.at("learning_rate").get<double>(), 1e-3 * 0.5);
}

TEST_F(QatCli, QuantizeCalibratesAndFreezesAnFp32Model) {
  auto fp32 = dir_.file("fp32.safetensors");
  train("--epochs 1 --save-model " + fp32 + kSmall);
  auto ptq = dir_.file("ptq.safetensors");
  auto run = run_qtft(dir_, "quantize --load-model " + fp32 + " --parquet-file " + data_ +
                                " --calibration-batches 4 --batch-size 16 --save-model " + ptq);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Loss on the validation split: source model"));
  EXPECT_THAT(run.out, HasSubstr("Calibration coverage: 64 windows in 4 batches"));
  // --split is honoured, not silently replaced.
  auto on_test = run_qtft(dir_, "quantize --load-model " + fp32 + " --parquet-file " + data_ +
                                    " --calibration-batches 4 --batch-size 16 --split test --save-model " +
                                    dir_.file("ptq-test.safetensors"));
  ASSERT_EQ(on_test.exit_code, 0) << on_test.err;
  EXPECT_THAT(on_test.out, HasSubstr("Loss on the test split: source model"));
  auto stats = observers(ptq);
  ASSERT_FALSE(stats.empty());
  for (const auto& s : stats) {
    EXPECT_TRUE(s.frozen);
    EXPECT_EQ(s.samples, 4);
  }
}

TEST_F(QatCli, ExportInt8GivesAFileThatEvaluatesAndForecastsAsTheQatModelDoes) {
  auto qat = dir_.file("qat.safetensors"), int8 = dir_.file("model.int8.safetensors");
  train("--use-qat --qat-calibration-batches 2 --epochs 1 --save-model " + qat + kSmall);
  auto run = run_qtft(dir_, "export-int8 --load-model " + qat + " --output " + int8);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("as 8-bit integers"));
  EXPECT_THAT(run.out, HasSubstr("Saved " + int8));
  // Never "0.26x smaller": a model this small gives a file larger than its float32 weights.
  EXPECT_THAT(run.out, ::testing::ContainsRegex("[1-9][0-9]*\\.[0-9]+x (smaller|larger) than the same weights"));

  // Dequantized kernels multiply exactly what the QAT model does; the default integer
  // kernels say how many products they run in integers.
  const std::string dequantized = " --int8-kernels dequantized";
  auto metrics = [&](const std::string& model, const std::string& flags) {
    auto json_path = dir_.file("metrics.json");
    auto r = run_qtft(
        dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --metrics-json " + json_path + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (model == int8) EXPECT_THAT(r.err, HasSubstr(flags.empty() ? "integer products: " : "int8 products in float"));
    return nlohmann::json::parse(test::read_text(json_path));
  };
  EXPECT_EQ(metrics(int8, dequantized)["model"], metrics(qat, "")["model"]);
  const double integer_loss = metrics(int8, "")["model"]["loss"].get<double>();
  EXPECT_NEAR(integer_loss, metrics(qat, "")["model"]["loss"].get<double>(), 0.005 * integer_loss);
  auto forecast = [&](const std::string& model, const std::string& flags) {
    auto r = run_qtft(dir_, "forecast --json --load-model " + model + " --parquet-file " + data_ + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(forecast(int8, dequantized), forecast(qat, ""));
  EXPECT_EQ(
      run_qtft(dir_, "forecast --load-model " + int8 + " --parquet-file " + data_ + " --int8-kernels fast").exit_code,
      2);

  run = run_qtft(dir_, "train --parquet-file " + data_ + " --use-qat --load-model " + int8 + kSmall);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(int8 + ": an int8 export serves forecasts and cannot be trained"));
}

TEST_F(QatCli, CompareAccuracyReportsEveryModelAndTheInt8Agreement) {
  auto json_path = dir_.file("compare.json");
  auto run = train("--compare-accuracy --epochs 2 --qat-calibration-batches 2 --metrics-json " + json_path + kSmall);
  EXPECT_THAT(run.out, HasSubstr("Accuracy comparison"));
  auto j = nlohmann::json::parse(test::read_text(json_path));
  EXPECT_THAT(run.out, HasSubstr("int8 against fake quant"));
  EXPECT_THAT(run.out, HasSubstr("every model has 2 epochs: QAT takes over the FP32 run after 1 and fine-tunes for 1"));
  for (const char* name : {"fp32", "ptq", "qat_frozen", "int8", "qat_live", "qat_step"}) {
    ASSERT_TRUE(j["models"].contains(name)) << name;
    for (const char* key : {"val_loss", "val_rmse", "degradation_pct"}) EXPECT_TRUE(j["models"][name].contains(key));
  }
  EXPECT_EQ(j["models"]["fp32"]["recipe"], "FP32, 2 epochs");
  EXPECT_EQ(j["models"]["qat_frozen"]["recipe"],
            "FP32 epoch 1, QAT epoch 2 at lr 0.001, 2 calibration batches, live 0.5 epoch(s), then frozen");
  EXPECT_EQ(j["models"]["qat_live"]["recipe"], "FP32 epoch 1, QAT epoch 2 at lr 0.001, 2 calibration batches, live");
  EXPECT_EQ(j["models"]["qat_step"]["recipe"],
            "FP32 epoch 1, QAT epoch 2 at lr 0.001, 2 calibration batches, live (updated once per step)");
  // Two ways of updating the observers, two models.
  EXPECT_NE(j["models"]["qat_step"]["val_loss"].get<double>(), j["models"]["qat_live"]["val_loss"].get<double>());
  EXPECT_EQ(j["models"]["fp32"]["degradation_pct"].get<double>(), 0.0);
  const auto& agreement = j["models"]["int8"]["against_fake_quant"];
  EXPECT_EQ(agreement["fake_quant_loss"].get<double>(), j["models"]["qat_frozen"]["val_loss"].get<double>());
  EXPECT_LT(std::abs(agreement["loss_difference_pct"].get<double>()), 0.5);
  EXPECT_GT(agreement["median_forecast_difference_steps"]["values"].get<int64_t>(), 0);
  // Every model's validation forecasts as a desk reads them, over the same windows.
  EXPECT_THAT(run.out, HasSubstr("coverage  IC step 1  hit rate"));
  const auto windows = j["models"]["fp32"]["desk"]["windows"].get<int64_t>();
  EXPECT_GT(windows, 0);
  for (const char* name : {"fp32", "ptq", "qat_frozen", "int8", "qat_live", "qat_step"}) {
    const auto& desk = j["models"][name]["desk"];
    EXPECT_EQ(desk["windows"], windows) << name;
    EXPECT_GE(desk["interval_coverage"].get<double>(), 0.0) << name;
    EXPECT_LE(desk["interval_coverage"].get<double>(), 1.0) << name;
    EXPECT_EQ(desk["ic_pooled"].size(), j["config"]["model"]["horizon"].get<size_t>()) << name;
  }
}

}  // namespace
}  // namespace qtft
