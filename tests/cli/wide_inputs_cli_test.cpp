// Many declared inputs, the wide model of issue 35: from 32 time-varying inputs on, each runs
// at the narrower default width (--variable-hidden-size) through the grouped selection
// networks and the grouped observers, and the promises made at few inputs hold there too:
// ranks train as one process, checkpointing changes no bit under data parallelism, Ctrl-C
// and --resume continue exactly, and the int8 export evaluates and forecasts as the QAT
// model does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "qtft/artifact/model_file.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;

// 42 observed inputs (the 5 derived ones and f00..f36) and the calendar's 4 known ones: 46,
// so the default width is min(16, hidden size).
const std::string kModel = " --hidden-size 32 --attention-heads 2 --encoder-length 16 --horizon 4 --observed 'f*'";

class WideInputsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("bars.parquet");
    const auto made = run_qtft(dir_, "make-data --output " + data_ + " --rows 2400 --symbols 2 --extra-inputs 40");
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  std::string train_args(const std::string& extra) const { return "train --parquet-file " + data_ + kModel + extra; }
  bool same_files(const std::string& a, const std::string& b) {
    const auto diff = run_qtft(dir_, "diff " + dir_.file(a) + " " + dir_.file(b));
    EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;
    return diff.exit_code == 0;
  }
  test::TempDir dir_;
  std::string data_;
};

TEST_F(WideInputsCli, RanksTrainAsOneProcessAndCheckpointingChangesNoBit) {
  // The default QAT route with calibration, observers updated once a step.
  const std::string common =
      " --epochs 1 --max-batches-per-epoch 2 --dropout 0 --seed 3 --use-qat --qat-calibration-batches 2 "
      "--observer-update step";
  auto two =
      run_qtft(dir_, train_args(common + " --nproc 2 --batch-size 8 --save-model " + dir_.file("two.safetensors")));
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_THAT(two.out, HasSubstr("hidden 32 (inputs at 16)"));
  auto one = run_qtft(dir_, train_args(common + " --batch-size 16 --save-model " + dir_.file("one.safetensors")));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto a = artifact::load_model_file(dir_.file("one.safetensors"));
  const auto b = artifact::load_model_file(dir_.file("two.safetensors"));
  EXPECT_EQ(a.options.variable_width(), 16);
  EXPECT_EQ(a.options.num_observed() + a.options.num_known(), 46);
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const auto& [name, value] = a.weights[i];
    ASSERT_EQ(name, b.weights[i].first);
    const double difference = (value.to(at::kDouble) - b.weights[i].second.to(at::kDouble)).abs().max().item<double>();
    // As DistributedCli's calibration test: the sums across ranks run in another order.
    EXPECT_LE(difference, name.ends_with("zero_point") ? 1.0 : 1e-5) << name;
  }

  // Checkpointed with the blocks policy (embeddings recomputed from the raw columns,
  // variables in chunks): bitwise the plain run of the same ranks.
  auto checkpointed = run_qtft(dir_, train_args(common +
                                                " --nproc 2 --batch-size 8 --use-gradient-checkpointing "
                                                "--checkpoint-policy blocks --save-model " +
                                                dir_.file("ckpt.safetensors")));
  ASSERT_EQ(checkpointed.exit_code, 0) << checkpointed.err;
  same_files("two.safetensors", "ckpt.safetensors");
}

TEST_F(WideInputsCli, CtrlCAndResumeContinueExactly) {
  // QAT with live observers, dropout on, checkpointed: the resumed run is the straight one.
  const std::string common =
      " --batch-size 8 --max-batches-per-epoch 2 --patience 0 --use-qat --qat-calibration-batches 2 "
      "--use-gradient-checkpointing --checkpoint-policy blocks";
  const auto checkpoint = dir_.file("stopped.safetensors");
  auto stopped = run_qtft(dir_, train_args(common + " --epochs 100000 --save-model " + checkpoint),
                          "timeout --foreground --preserve-status -s INT 10");
  ASSERT_EQ(stopped.exit_code, 130) << stopped.out << stopped.err;
  const auto saved = artifact::load_model_file(checkpoint);
  ASSERT_TRUE(saved.training.has_value());
  const int64_t epochs = saved.training->epochs_completed + 1;
  auto resumed = run_qtft(dir_, "train --resume --load-model " + checkpoint + " --epochs " + std::to_string(epochs) +
                                    " --save-model " + dir_.file("resumed.safetensors"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  auto straight = run_qtft(dir_, train_args(common + " --epochs " + std::to_string(epochs) + " --save-model " +
                                            dir_.file("straight.safetensors")));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  same_files("resumed.safetensors", "straight.safetensors");
}

TEST_F(WideInputsCli, TheInt8ExportEvaluatesAndForecastsAsTheQatModel) {
  const auto qat = dir_.file("qat.safetensors"), int8 = dir_.file("model.int8.safetensors");
  auto run = run_qtft(dir_, train_args(" --epochs 1 --max-batches-per-epoch 4 --batch-size 16 --use-qat "
                                       "--qat-calibration-batches 2 --save-model " +
                                       qat));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  run = run_qtft(dir_, "export-int8 --load-model " + qat + " --output " + int8);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Every variable keeps its own scales in the export: dequantized kernels multiply what
  // the QAT model multiplies (its grouped networks), bitwise; the integer kernels run the
  // per-variable modules, each product in integers, close to it.
  auto metrics = [&](const std::string& model, const std::string& flags) {
    const auto json = dir_.file("metrics.json");
    auto r = run_qtft(
        dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --metrics-json " + json + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(test::read_text(json))["model"];
  };
  const std::string dequantized = " --int8-kernels dequantized";
  EXPECT_EQ(metrics(int8, dequantized), metrics(qat, ""));
  const double integer_loss = metrics(int8, "")["loss"].get<double>();
  EXPECT_NEAR(integer_loss, metrics(qat, "")["loss"].get<double>(), 0.005 * integer_loss);
  auto forecast = [&](const std::string& model, const std::string& flags) {
    auto r = run_qtft(dir_, "forecast --json --load-model " + model + " --parquet-file " + data_ + flags);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  EXPECT_EQ(forecast(int8, dequantized), forecast(qat, ""));
}

}  // namespace
}  // namespace qtft
