// QAT training on a CUDA GPU: what the design note's hardware needs, proven where a GPU is
// present (ctest label `cuda`; every test skips on a machine without one). Bitwise promises
// run under the deterministic mode (memory::use_deterministic_algorithms), which each test
// process sets before its first CUDA work: ctest runs every test in a process of its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "memory/bitwise.h"
#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/memory/device_settings.h"
#include "qtft/memory/rng_state.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/trainer.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

using ::testing::HasSubstr;
const c10::Device kGpu(c10::kCUDA, 0);

class GpuTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU on this machine";
    memory::use_deterministic_algorithms();
  }
  test::TempDir dir_;
};

void expect_bitwise_equal(const artifact::NamedTensors& a, const artifact::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    if (!test::bitwise_equal(a[i].second, b[i].second)) {
      ADD_FAILURE() << a[i].first << " differs";
      if (++differing > 10) return;
    }
  }
}

struct Run {
  TrainResult result;
  artifact::TrainingState state;
  artifact::NamedTensors best;
};

// A QAT model with live observers, calibrated and trained on the GPU, dropout on.
Run train_qat(const data::Dataset& d, memory::CheckpointPolicy policy, const std::function<bool()>& stop = {},
              Precision precision = Precision::Fp32) {
  // Two LSTM layers: on a GPU the dropout between them is drawn layer by layer (tft.cpp).
  auto model = model::build_model(test::tiny_model_options(d).use_qat(true).dropout(0.2).lstm_layers(2), 7);
  model->to(kGpu);
  calibrate_observers(model, d, 2, 16, 42, kGpu);
  auto options = test::tiny_train_options();
  options.checkpoint_policy = policy;
  options.precision = precision;
  Trainer trainer(model, test::shared(d), options, kGpu);
  ProgressReporter quiet;
  auto result = trainer.fit(quiet, stop);
  return {result, trainer.state(), trainer.best_weights()};
}

TEST_F(GpuTraining, CheckpointedEqualsPlainBitwiseWithLiveObservers) {
  const auto d = test::tiny_dataset();
  const auto plain = train_qat(d, memory::CheckpointPolicy::None);
  for (auto policy : {memory::CheckpointPolicy::Blocks, memory::CheckpointPolicy::Lstm}) {
    const auto checkpointed = train_qat(d, policy);
    expect_bitwise_equal(plain.state.current_weights, checkpointed.state.current_weights);
    expect_bitwise_equal(plain.state.optimizer, checkpointed.state.optimizer);
    EXPECT_TRUE(test::bitwise_equal(plain.state.cuda_rng_state, checkpointed.state.cuda_rng_state))
        << memory::checkpoint_policy_name(policy) << ": the CUDA stream after training moved";
  }
  // The run drew from its own CUDA stream, and dropout moved it.
  ASSERT_TRUE(plain.state.cuda_rng_state.defined());
  EXPECT_FALSE(test::bitwise_equal(plain.state.cuda_rng_state, memory::RandomStream(42, kGpu).cuda_state()));
}

// --precision bf16 on the GPU: CUDA autocast, and the recompute under the forward's state.
TEST_F(GpuTraining, Bf16CheckpointedEqualsPlainBitwiseWithLiveObservers) {
  const auto d = test::tiny_dataset();
  const auto plain = train_qat(d, memory::CheckpointPolicy::None, {}, Precision::Bf16);
  for (auto policy : {memory::CheckpointPolicy::Blocks, memory::CheckpointPolicy::Lstm}) {
    const auto checkpointed = train_qat(d, policy, {}, Precision::Bf16);
    expect_bitwise_equal(plain.state.current_weights, checkpointed.state.current_weights);
    expect_bitwise_equal(plain.state.optimizer, checkpointed.state.optimizer);
  }
  // bf16 products took effect: the weights are not FP32's.
  const auto fp32 = train_qat(d, memory::CheckpointPolicy::None);
  ASSERT_EQ(fp32.state.current_weights.size(), plain.state.current_weights.size());
  int differing = 0;
  for (size_t i = 0; i < fp32.state.current_weights.size(); ++i) {
    differing += !test::bitwise_equal(fp32.state.current_weights[i].second, plain.state.current_weights[i].second);
  }
  EXPECT_GT(differing, 0);
}

TEST_F(GpuTraining, ResumeAfterAStopIsBitwiseTheRunNeverStopped) {
  const auto d = test::tiny_dataset();
  const auto straight = train_qat(d, memory::CheckpointPolicy::None);
  int polls = 0;
  const auto stopped = train_qat(d, memory::CheckpointPolicy::None, [&] { return ++polls == 9; });
  ASSERT_TRUE(stopped.result.interrupted);
  const auto path = dir_.file("stopped.safetensors");
  artifact::save_model_file(path, {test::tiny_model_options(d).use_qat(true).dropout(0.2).lstm_layers(2), d.schema(),
                                   d.options(), stopped.best, stopped.state});
  auto loaded = artifact::load_model(path, kGpu);
  ASSERT_TRUE(loaded.file.training->cuda_rng_state.defined()) << "the file keeps the CUDA stream";
  Trainer resumed(loaded.model, test::shared(d), test::tiny_train_options(), kGpu);
  resumed.resume_from(*loaded.file.training, loaded.file.weights);
  ProgressReporter quiet;
  EXPECT_FALSE(resumed.fit(quiet).interrupted);
  expect_bitwise_equal(resumed.state().current_weights, straight.state.current_weights);
  expect_bitwise_equal(resumed.state().optimizer, straight.state.optimizer);
}

TEST_F(GpuTraining, QatFromScratchCalibratesOnTheGpuAndServesInt8OnTheCpu) {
  const auto model = dir_.file("qat.safetensors"), int8 = dir_.file("qat-int8.safetensors");
  auto train = test::run_qtft(dir_,
                              "train --device cuda --deterministic --use-qat --epochs 1 --max-batches-per-epoch 4 "
                              "--hidden-size 8 --save-model " +
                                  model);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_THAT(train.out, HasSubstr("device cuda:0 ("));
  ASSERT_EQ(test::run_qtft(dir_, "export-int8 --load-model " + model + " --output " + int8).exit_code, 0);
  // Under auto on a GPU machine an int8 file still multiplies in integers, on the CPU.
  auto evaluate = test::run_qtft(dir_, "evaluate --device auto --load-model " + int8);
  ASSERT_EQ(evaluate.exit_code, 0) << evaluate.err;
  EXPECT_THAT(evaluate.err, HasSubstr("integer products: "));
  EXPECT_THAT(evaluate.err, HasSubstr("on the CPU, where integer products run, not on cuda:0"));
}

TEST_F(GpuTraining, TwoPhaseRunsBothPhasesOnTheGpu) {
  auto run = test::run_qtft(dir_,
                            "train --device cuda --two-phase --epochs 2 --max-batches-per-epoch 3 "
                            "--hidden-size 8 --save-model " +
                                dir_.file("two-phase.safetensors"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("QAT"));
}

TEST_F(GpuTraining, CtrlCSavesACheckpointThatResumesOnTheGpu) {
  const auto model = dir_.file("stopped.safetensors");
  // Far too long to finish: one SIGINT after a few seconds, as Ctrl-C would.
  auto stopped =
      test::run_qtft(dir_, "train --device cuda --use-qat --epochs 500 --hidden-size 8 --save-model " + model,
                     "timeout --foreground --preserve-status -s INT 20");
  ASSERT_EQ(stopped.exit_code, 130) << stopped.err;
  const auto checkpoint = artifact::load_model_file(model);
  ASSERT_TRUE(checkpoint.training.has_value());
  EXPECT_TRUE(checkpoint.training->cuda_rng_state.defined()) << "the CUDA stream is saved for --resume";
  const int64_t next = checkpoint.training->epochs_completed + 1;
  auto resumed =
      test::run_qtft(dir_, "train --device cuda --resume --load-model " + model + " --epochs " + std::to_string(next));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto finished = artifact::load_model_file(model);
  EXPECT_EQ(finished.training->epochs_completed, next);
  EXPECT_TRUE(finished.training->finished);
}

TEST_F(GpuTraining, MemoryReportUnderA4GiBLimitStaysWithinIt) {
  auto run = test::run_qtft(dir_, "memory-report --device cuda --gpu-memory-limit 4GiB --use-qat --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j.at("config").at("gpu_memory_limit_bytes").get<int64_t>(), int64_t{4} << 30);
  for (const char* side : {"without", "with"}) {
    const auto& step = j.at(side);
    EXPECT_FALSE(step.at("out_of_memory").get<bool>()) << side;
    EXPECT_GT(step.at("reserved_peak_bytes").get<int64_t>(), 0) << side;
    EXPECT_LE(step.at("reserved_peak_bytes").get<int64_t>(), int64_t{4} << 30) << side;
    EXPECT_GE(step.at("reserved_peak_bytes").get<int64_t>(), step.at("total_peak_bytes").get<int64_t>()) << side;
  }
}

TEST_F(GpuTraining, RunningOutOfGpuMemoryEndsInOneLineAndACheckpoint) {
  const auto model = dir_.file("oom.safetensors");
  auto run = test::run_qtft(dir_,
                            "train --device cuda --gpu-memory-limit 8MiB --hidden-size 64 --batch-size 512 "
                            "--epochs 1 --save-model " +
                                model);
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("out of memory on cuda:0 in epoch 1, batch 1"));
  EXPECT_THAT(run.err, HasSubstr("reserved peak"));
  EXPECT_THAT(run.err, HasSubstr("--use-gradient-checkpointing"));
  EXPECT_TRUE(std::filesystem::exists(model)) << "a checkpoint saved as on Ctrl-C";
}

TEST_F(GpuTraining, AGpuMemoryLimitAboveTheCardIsAUsageError) {
  auto run = test::run_qtft(dir_, "train --device cuda --gpu-memory-limit 64TiB --epochs 1");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--gpu-memory-limit 64.0 TiB is more than cuda:0 has"));
}

TEST_F(GpuTraining, NcclWithOneRankTrainsWithTheStepObserversCollective) {
  const auto port = std::to_string(29500 + ::getpid() % 1000);
  auto run = test::run_qtft(dir_,
                            "train --device cuda --use-qat --observer-update step --epochs 1 "
                            "--max-batches-per-epoch 3 --hidden-size 8",
                            "WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port);
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

}  // namespace
}  // namespace qtft::train
