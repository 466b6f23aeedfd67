// Activation checkpointing as users run it: the seed-style commands, model files that
// `qtft diff` finds identical with and without it, the auto policy, and flag errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

const std::string kSmall =
    " --hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4 --max-batches-per-epoch 3 --batch-size 16"
    " --epochs 2 --qat-calibration-batches 2 --patience 0";

class CheckpointingCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("bars.parquet");
    ASSERT_EQ(run_qtft(dir_, "make-data --output " + data_ + " --rows 2400 --symbols 2").exit_code, 0);
  }
  test::CliRun train(const std::string& args) { return run_qtft(dir_, "train --parquet-file " + data_ + " " + args); }
  // Trains twice, without and with checkpointing, and diffs the two model files.
  test::CliRun train_and_diff(const std::string& args, const std::string& checkpointing) {
    const auto plain = dir_.file("plain.safetensors"), checkpointed = dir_.file("checkpointed.safetensors");
    auto run = train(args + " --save-model " + plain);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    run = train(args + " " + checkpointing + " --save-model " + checkpointed);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_THAT(run.out, HasSubstr("Activation checkpointing: "));
    return run_qtft(dir_, "diff " + plain + " " + checkpointed);
  }
  test::TempDir dir_;
  std::string data_;
};

TEST_F(CheckpointingCli, LiveQatModelFilesAreIdenticalWithAndWithoutCheckpointing) {
  auto diff = train_and_diff("--use-qat" + kSmall, "--use-gradient-checkpointing");
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
  EXPECT_THAT(diff.out, Not(HasSubstr("DIFFERENT")));
}

TEST_F(CheckpointingCli, FrozenQatModelFilesAreIdenticalUnderTheLstmPolicy) {
  auto diff = train_and_diff("--use-qat --freeze-qat-observers" + kSmall,
                             "--use-gradient-checkpointing --checkpoint-policy lstm");
  EXPECT_EQ(diff.exit_code, 0) << diff.out;
}

TEST_F(CheckpointingCli, EpochLinesReportThePeakMemoryAndAutoTheFigureWithout) {
  // A budget no step fits: the error names every measured peak.
  auto run = train("--use-qat --use-gradient-checkpointing --checkpoint-policy auto --memory-budget 1KiB" + kSmall);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("--memory-budget 1.0 KiB: no checkpoint policy fits one training step"));
  EXPECT_THAT(run.err, HasSubstr("without checkpointing"));
  EXPECT_THAT(run.err, HasSubstr("with lstm"));
  // A budget every policy fits: the least recomputation (none) is chosen.
  run = train("--use-qat --use-gradient-checkpointing --checkpoint-policy auto --memory-budget 64GiB" + kSmall);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Checkpoint policy auto: none (step peak without checkpointing "));
  EXPECT_THAT(run.out, MatchesRegex("(.|\n)*epoch 1/2 .* peak_mem=[0-9.]+[KM]iB(.|\n)*"));
}

TEST_F(CheckpointingCli, FlagMistakesAreUsageErrorsNamingTheFlag) {
  auto run = train("--checkpoint-policy lstm" + kSmall);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--checkpoint-policy and --memory-budget need --use-gradient-checkpointing"));
  // Naming the default policy is no less a mistake without the flag: it is not ignored.
  run = train("--checkpoint-policy blocks" + kSmall);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("need --use-gradient-checkpointing"));
  run = train("--use-gradient-checkpointing --checkpoint-policy auto" + kSmall);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--checkpoint-policy auto needs --memory-budget"));
  run = train("--use-gradient-checkpointing --checkpoint-policy sometimes" + kSmall);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--checkpoint-policy must be none, blocks, lstm or auto, got 'sometimes'"));
  run = train("--use-gradient-checkpointing --checkpoint-policy auto --memory-budget lots" + kSmall);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--memory-budget"));
  EXPECT_THAT(run.err, HasSubstr("\"lots\""));
}

}  // namespace
}  // namespace qtft
