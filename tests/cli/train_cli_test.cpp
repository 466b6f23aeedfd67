// The model workflow from the command line: train -> files -> evaluate, predict, explain,
// diff; and Ctrl-C during training leaves a checkpoint that --resume continues.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qtft/artifact/model_file.h"
#include "qtft/common/cpu_features.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;

const std::string kModel = " --hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4";
const std::string kShort = " --epochs 2 --max-batches-per-epoch 3 --batch-size 16";

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("bars.parquet");
    ASSERT_EQ(run_qtft(dir_, "make-data --output " + data_ + " --rows 2400 --symbols 2").exit_code, 0);
  }
  std::string train(const std::string& name, const std::string& extra = "") {
    auto model = dir_.file(name);
    auto run = run_qtft(dir_, "train --parquet-file " + data_ + kModel + kShort + " --save-model " + model + extra);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return model;
  }
  test::TempDir dir_;
  std::string data_;
};

TEST_F(TrainCli, DeterministicModeChangesNoBitOnTheCpu) {
  // The GPU's deterministic algorithms: on the CPU, qtft's kernels are deterministic already.
  const auto plain = train("plain.safetensors", " --use-qat");
  const auto deterministic = train("deterministic.safetensors", " --use-qat --deterministic");
  auto diff = run_qtft(dir_, "diff " + plain + " " + deterministic);
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
}

TEST_F(TrainCli, AGpuMemoryLimitWithoutAGpuIsAUsageErrorOfOneLine) {
  // On the CPU the limit would limit nothing: refused before the data loads, not ignored.
  for (const char* command : {"train", "memory-report"}) {
    auto run = run_qtft(dir_, std::string(command) + " --device cpu --gpu-memory-limit 4GiB --parquet-file " + data_);
    EXPECT_EQ(run.exit_code, 2) << command << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr("--gpu-memory-limit limits a CUDA GPU's memory, and this run is on cpu"));
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
  auto malformed = run_qtft(dir_, "train --device cpu --gpu-memory-limit lots --parquet-file " + data_);
  EXPECT_EQ(malformed.exit_code, 2) << malformed.err;
  EXPECT_THAT(malformed.err, HasSubstr("--gpu-memory-limit"));
}

TEST_F(TrainCli, MetricsJsonHasTheDocumentedKeys) {
  auto json_path = dir_.file("metrics.json");
  train("m.safetensors", " --metrics-json " + json_path);
  auto j = nlohmann::json::parse(test::read_text(json_path));
  for (const char* key :
       {"val_loss", "val_rmse", "val_mae", "baseline_val_loss", "epochs", "parameters", "train_seconds"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["epochs"].size(), 2u);
  EXPECT_GT(j["parameters"].get<int64_t>(), 0);
  EXPECT_TRUE(std::isfinite(j["val_loss"].get<double>()));
}

TEST_F(TrainCli, EvaluateOfTheSavedModelReproducesTrainingsValidationLoss) {
  auto json_path = dir_.file("metrics.json");
  auto model = train("m.safetensors", " --metrics-json " + json_path);
  auto trained = nlohmann::json::parse(test::read_text(json_path));
  auto eval_json = dir_.file("eval.json");
  auto run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ +
                                " --split validation --metrics-json " + eval_json);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("training quantiles"));
  auto evaluated = nlohmann::json::parse(test::read_text(eval_json));
  EXPECT_EQ(evaluated["val_loss"].get<double>(), trained["val_loss"].get<double>());
  EXPECT_EQ(evaluated["baseline_val_loss"].get<double>(), trained["baseline_val_loss"].get<double>());
  // On another split the keys say which.
  run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --split test --metrics-json " +
                           eval_json);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  evaluated = nlohmann::json::parse(test::read_text(eval_json));
  EXPECT_EQ(evaluated["split"], "test");
  EXPECT_TRUE(evaluated.contains("test_loss") && evaluated.contains("test_rmse") && evaluated.contains("test_mae") &&
              evaluated.contains("baseline_test_loss"))
      << evaluated.dump();
  EXPECT_FALSE(evaluated.contains("val_loss"));
  EXPECT_NE(evaluated["test_loss"].get<double>(), trained["val_loss"].get<double>());
}

// The desk's metrics of issue 36 (values checked by hand in tests/eval/desk_metrics_test.cpp):
// in the JSON with the series named, and the cost taken from the position's returns.
TEST_F(TrainCli, EvaluateReportsTheDeskMetrics) {
  auto model = train("m.safetensors");
  auto desk = [&](const std::string& cost) {
    const auto json = dir_.file("eval.json");
    auto run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --cost-bps " + cost +
                                  " --metrics-json " + json);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.out, HasSubstr("central interval"));
    return nlohmann::json::parse(test::read_text(json));
  };
  const auto free = desk("0"), costly = desk("5");
  const auto& d = free.at("desk");
  EXPECT_EQ(d.at("windows"), free.at("windows"));
  for (const char* level : {"0.1", "0.5", "0.9"}) {
    const double c = d.at("coverage").at(level).get<double>();
    EXPECT_TRUE(c > 0.0 && c < 1.0) << level << ": " << c;
  }
  EXPECT_TRUE(d.at("ic_per_series").contains("ES") && d.at("ic_per_series").contains("NQ")) << d.dump();
  EXPECT_EQ(d.at("ic_pooled").size(), 4u);  // one per horizon step
  // Both series forecast every bar: the cost takes cost x turnover off the mean return.
  const auto& p = d.at("position");
  const auto& q = costly.at("desk").at("position");
  EXPECT_EQ(p.at("turnover"), q.at("turnover"));
  EXPECT_NEAR(p.at("mean_return").get<double>() - q.at("mean_return").get<double>(),
              5e-4 * p.at("turnover").get<double>(), 1e-12);

  // Every window of the file, across the splits: 1200 bars a symbol give 1199 feature rows
  // and 1199 - (16 + 4) + 1 windows of encoder 16 and horizon 4.
  const auto json = dir_.file("all.json");
  auto run = run_qtft(
      dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --split all --metrics-json " + json);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto all = nlohmann::json::parse(test::read_text(json));
  EXPECT_EQ(all.at("split"), "all");
  EXPECT_EQ(all.at("windows"), 2 * 1180);
  EXPECT_EQ(all.at("desk").at("windows"), 2 * 1180);

  run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --cost-bps -1");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--cost-bps"));
}

TEST_F(TrainCli, PredictWritesOneRowPerWindowAndStep) {
  auto model = train("m.safetensors");
  auto out = dir_.file("forecasts.csv");
  auto run = run_qtft(dir_, "predict --load-model " + model + " --parquet-file " + data_ + " --output " + out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto text = test::read_text(out);
  auto header = text.substr(0, text.find('\n'));
  EXPECT_EQ(header,
            "\"timestamp\",\"origin\",\"symbol\",\"step\",\"origin_close\",\"actual_return\",\"return_q0.1\","
            "\"return_q0.5\",\"return_q0.9\",\"price_q0.1\",\"price_q0.5\",\"price_q0.9\"");
  // 2 symbols x 1199 rows: test split rows [1019, 1199) -> 180 - 20 + 1 = 161 windows each.
  EXPECT_THAT(run.out, HasSubstr("322 test windows x 4 steps"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 322 * 4);

  // The desk's metrics of the same forecasts: those evaluate gives on the same split.
  const auto predicted = dir_.file("predict.json"), evaluated = dir_.file("evaluate.json");
  run = run_qtft(dir_, "predict --load-model " + model + " --parquet-file " + data_ + " --output " + out +
                           " --cost-bps 5 --metrics-json " + predicted);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("as a desk reads them"));
  ASSERT_EQ(run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ +
                               " --cost-bps 5 --metrics-json " + evaluated)
                .exit_code,
            0);
  const auto p = nlohmann::json::parse(test::read_text(predicted));
  const auto e = nlohmann::json::parse(test::read_text(evaluated));
  EXPECT_EQ(p.at("desk"), e.at("desk"));
  EXPECT_EQ(p.at("model").at("loss"), e.at("model").at("loss"));
  EXPECT_EQ(p.at("desk").at("windows"), 322);
}

TEST_F(TrainCli, ExplainWeightsAreDistributions) {
  auto model = train("m.safetensors");
  auto json_path = dir_.file("explain.json");
  auto run = run_qtft(dir_, "explain --load-model " + model + " --parquet-file " + data_ + " --json " + json_path);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Past (encoder) variable selection:"));
  auto j = nlohmann::json::parse(test::read_text(json_path));
  for (const char* key : {"encoder_weights", "decoder_weights"}) {
    double sum = 0;
    for (const auto& [_, w] : j[key].items()) sum += w.get<double>();
    EXPECT_NEAR(sum, 1.0, 1e-6) << key;
  }
  double attention = 0;
  for (const auto& p : j["attention"]) attention += p["weight"].get<double>();
  EXPECT_NEAR(attention, 1.0, 1e-6);
  EXPECT_EQ(j["attention"].size(), 20u);
}

TEST_F(TrainCli, SameSeedGivesIdenticalFilesAndDiffSaysSo) {
  auto a = train("a.safetensors", " --seed 5");
  auto b = train("b.safetensors", " --seed 5");
  auto c = train("c.safetensors", " --seed 6");
  auto same = run_qtft(dir_, "diff " + a + " " + b);
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_EQ(run_qtft(dir_, "diff " + a + " " + c).exit_code, 1);
}

// The validation batch is memory only: the weights learned are the same bits, and the
// validation loss the same to the rounding of its sums.
TEST_F(TrainCli, EvalBatchSizeChangesMemoryNotTheModel) {
  auto json_a = dir_.file("a.json"), json_b = dir_.file("b.json");
  auto a = train("a.safetensors", " --metrics-json " + json_a);
  auto b = train("b.safetensors", " --eval-batch-size 7 --metrics-json " + json_b);
  auto same = run_qtft(dir_, "diff " + a + " " + b);
  EXPECT_EQ(same.exit_code, 0) << same.out;
  const double loss_a = nlohmann::json::parse(test::read_text(json_a))["val_loss"].get<double>();
  const double loss_b = nlohmann::json::parse(test::read_text(json_b))["val_loss"].get<double>();
  EXPECT_NEAR(loss_a, loss_b, 1e-6 * std::abs(loss_a));
  auto zero = run_qtft(dir_, "train --parquet-file " + data_ + kModel + kShort + " --eval-batch-size 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_THAT(zero.err, HasSubstr("--eval-batch-size"));
}

TEST_F(TrainCli, CtrlCSavesACheckpointThatResumeContinues) {
  // A run far too long to finish, stopped by one SIGINT as Ctrl-C would. The 8 seconds
  // leave room for the process to start (loading LibTorch) on a busy machine; --foreground
  // makes timeout signal only qtft, not its process group too: a second signal is the
  // user insisting, and kills.
  auto checkpoint = dir_.file("ckpt.safetensors");
  auto run =
      run_qtft(dir_,
               "train --parquet-file " + data_ + kModel +
                   " --epochs 100000 --patience 0 --max-batches-per-epoch 2 --batch-size 8 --save-model " + checkpoint,
               "timeout --foreground --preserve-status -s INT 8");
  ASSERT_EQ(run.exit_code, 130) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("saved a resumable checkpoint to " + checkpoint));
  // The printed command is complete: the data, epochs and save path come from the checkpoint.
  EXPECT_THAT(run.err, HasSubstr("continue with: qtft train --resume --load-model " + checkpoint + "\n"));
  auto saved = artifact::load_model_file(checkpoint);
  ASSERT_TRUE(saved.training.has_value());
  EXPECT_FALSE(saved.training->finished);

  int64_t next = saved.training->epochs_completed + 1;
  run = run_qtft(dir_, "train --parquet-file " + data_ + " --load-model " + checkpoint + " --resume --epochs " +
                           std::to_string(next) + " --save-model " + dir_.file("resumed.safetensors"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Resuming after epoch " + std::to_string(next - 1)));
  auto resumed = artifact::load_model_file(dir_.file("resumed.safetensors"));
  EXPECT_EQ(resumed.training->epochs_completed, next);
  EXPECT_TRUE(resumed.training->finished);
}

TEST_F(TrainCli, ResumeAloneContinuesTheRecordedRun) {
  auto model = train("run.safetensors");  // 2 epochs on data_, saved to run.safetensors
  // No data flags, no --save-model: both come from the checkpoint.
  auto run = run_qtft(dir_, "train --resume --load-model " + model + " --epochs 3");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Continuing the run of " + model + ": 3 epochs, saving to " + model));
  EXPECT_THAT(run.out, HasSubstr("Data: " + data_));
  auto resumed = artifact::load_model_file(model);
  EXPECT_EQ(resumed.training->epochs_completed, 3);
  // Without --epochs, the run's own budget: a finished run stays finished.
  run = run_qtft(dir_, "train --resume --load-model " + model);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr(": 3 epochs, saving to"));
  EXPECT_EQ(artifact::load_model_file(model).training->epochs_completed, 3);
}

TEST_F(TrainCli, PrecisionIsTheRunsAndItsMistakesAreUsageErrors) {
  auto bad = run_qtft(dir_, "train --precision fp16 --parquet-file " + data_);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("fp16"));
  if (!this_cpu_bf16_features().any()) {
    auto refused = run_qtft(dir_, "train --precision bf16 --parquet-file " + data_);
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_THAT(refused.err, HasSubstr("neither avx512_bf16 nor amx_bf16"));
    GTEST_SKIP() << "this CPU has neither avx512_bf16 nor amx_bf16: bf16 itself is not run";
  }
  const auto model = train("bf16.safetensors", " --use-qat --precision bf16");
  EXPECT_EQ(artifact::load_model_file(model).training->config.at("precision"), "bf16");
  // A resume keeps the run's precision: another one is refused, naming both.
  auto other = run_qtft(dir_, "train --resume --load-model " + model + " --epochs 3 --precision fp32");
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_THAT(other.err, HasSubstr("--precision fp32: " + model + " was trained in bf16"));
  auto resumed = run_qtft(dir_, "train --resume --load-model " + model + " --epochs 3");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto file = artifact::load_model_file(model);
  EXPECT_EQ(file.training->config.at("precision"), "bf16");
  EXPECT_EQ(file.training->epochs_completed, 3);
  // The file stays FP32: it serves in either precision.
  for (const auto& [name, weight] : file.weights) {
    if (weight.is_floating_point()) EXPECT_EQ(weight.scalar_type(), at::kFloat) << name;
  }
  for (const char* precision : {"fp32", "bf16"}) {
    auto evaluated =
        run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --precision " + precision);
    EXPECT_EQ(evaluated.exit_code, 0) << precision << ": " << evaluated.err;
  }
  // An int8 export's products are integers: bf16 has nothing to narrow there.
  const auto int8 = dir_.file("bf16.int8.safetensors");
  ASSERT_EQ(run_qtft(dir_, "export-int8 --load-model " + model + " --output " + int8).exit_code, 0);
  auto narrowed = run_qtft(dir_, "evaluate --load-model " + int8 + " --parquet-file " + data_ + " --precision bf16");
  EXPECT_EQ(narrowed.exit_code, 2) << narrowed.err;
  EXPECT_THAT(narrowed.err, HasSubstr("is an int8 export"));
}

TEST_F(TrainCli, MistakesInFlagsAndOutputsStopBeforeAnyWork) {
  for (const std::string& flags :
       {std::string(" --save-model ") + dir_.file("no/such/dir/m.safetensors"), " --save-model " + dir_.path().string(),
        " --metrics-json " + dir_.file("no/such/dir/m.json"), std::string(" --epochs 0"), std::string(" --epochs -1"),
        std::string(" --quantiles 0.1,0.9"), std::string(" --hidden-size 100000"), std::string(" --threads 999")}) {
    SCOPED_TRACE(flags);
    auto run = run_qtft(dir_, "train --parquet-file " + data_ + flags);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_THAT(run.out, ::testing::Not(HasSubstr("Data:")));  // the data was never loaded
    EXPECT_EQ(run.err.rfind("qtft: ", 0), 0u) << run.err;      // one message, no stack trace
  }
}

TEST_F(TrainCli, SigtermDuringCalibrationEndsTheRunAtOnce) {
  // Calibration far too long to finish: the first SIGTERM ends it, with exit 130 and nothing
  // saved (training has not begun). A run that ignored it would be killed at 300 s (137).
  auto run = run_qtft(dir_,
                      "train --parquet-file " + data_ + kModel +
                          " --use-qat --qat-calibration-batches 1000000 --save-model " + dir_.file("never.safetensors"),
                      test::kHangGuard + " timeout --foreground --preserve-status -s TERM 6");
  EXPECT_EQ(run.exit_code, 130) << run.err;
  EXPECT_THAT(run.err, HasSubstr("interrupted during QAT calibration"));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("never.safetensors")));
}

TEST_F(TrainCli, ResumeNeedsAModel) {
  auto run = run_qtft(dir_, "train --resume");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--resume needs --load-model"));
}

TEST_F(TrainCli, UpdateLearnsOnlyFromBarsAfterTheModelsOwnUntilNoneAreLeft) {
  auto model = train("deployed.safetensors");
  auto parent = artifact::load_model_file(model);
  ASSERT_TRUE(parent.lineage);
  ASSERT_EQ(parent.lineage->trained_through.size(), 2u);
  // The same file: the bars after the training split (the old validation and test bars) are new.
  auto updated = dir_.file("updated.safetensors");
  auto run = run_qtft(dir_, "train --parquet-file " + data_ + " --load-model " + model + " --update" + kShort +
                                " --save-model " + updated);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Update of deployed.safetensors fnv1a64:"));
  auto child = artifact::load_model_file(updated);
  ASSERT_TRUE(child.lineage);
  EXPECT_THAT(child.lineage->parent, HasSubstr("deployed.safetensors fnv1a64:"));
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_GT(child.lineage->trained_through[s].bar_ns, parent.lineage->trained_through[s].bar_ns);
  }
  // Updating again and again leaves too few new bars: a clear error, exit 1, nothing written.
  std::string last = updated;
  for (int i = 0; i < 20 && run.exit_code == 0; ++i) {
    auto next = dir_.file("update" + std::to_string(i) + ".safetensors");
    run = run_qtft(dir_, "train --parquet-file " + data_ + " --load-model " + last + " --update" + kShort +
                             " --save-model " + next);
    if (run.exit_code == 0) last = next;
  }
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("--update: too few new bars"));

  run = run_qtft(dir_, "train --parquet-file " + data_ + " --load-model " + model + " --update --two-phase");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--update continues the model as it is"));
}

TEST_F(TrainCli, WatchPrintsAVerdictPerSeriesAndExitsWithItsCode) {
  auto model = train("deployed.safetensors");
  auto json_path = dir_.file("watch.json");
  auto run = run_qtft(dir_, "watch --load-model " + model + " --parquet-file " + data_ + " --reference " + model +
                                " --cost-bps 3 --json " + json_path);
  auto j = nlohmann::json::parse(test::read_text(json_path));
  EXPECT_EQ(run.exit_code, j["exit_code"].get<int>()) << run.err;
  EXPECT_EQ(j["overall"]["desk"]["position"]["cost_bps"], 3.0);
  EXPECT_EQ(j["overall"]["desk"]["windows"], j["overall"]["windows"]);
  EXPECT_THAT(run.out, HasSubstr("    as a desk reads it: interval coverage"));
  EXPECT_THAT(run.exit_code, ::testing::AnyOf(0, 3, 4));  // never 5 against itself
  EXPECT_EQ(j["series"].size(), 2u);
  EXPECT_EQ(j["reference"]["difference_pct"].get<double>(), 0.0);
  EXPECT_THAT(run.out, HasSubstr("  overall      loss "));
  EXPECT_THAT(run.out, HasSubstr("keep the model"));
  run = run_qtft(dir_, "watch --load-model " + model);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("watch needs --parquet-file or --csv-file"));
}

}  // namespace
}  // namespace qtft
