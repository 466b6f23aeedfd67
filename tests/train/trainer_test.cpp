// The training loop's promises: bit-identical runs for a seed, exact resume after an
// interrupt, and the best epoch's weights kept.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/equal.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <type_traits>

#include "memory/bitwise.h"
#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/cpu_features.h"
#include "qtft/eval/evaluate.h"
#include "qtft/memory/memory_tracker.h"
#include "qtft/memory/rng_state.h"
#include "qtft/model/model_building.h"
#include "qtft/train/trainer.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

const c10::Device kCpu(c10::kCPU);

void expect_bitwise_equal(const artifact::NamedTensors& a, const artifact::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(test::bitwise_equal(a[i].second, b[i].second)) << a[i].first;
  }
}

// A trainer cannot hold a dataset that dies before it: the dataset is shared, never a
// reference a temporary could bind to.
static_assert(!std::is_constructible_v<Trainer, model::TemporalFusionTransformer, const data::Dataset&, TrainOptions,
                                       c10::Device>);

struct Run {
  TrainResult result;
  artifact::TrainingState state;
  artifact::NamedTensors best;
};

Run train_once(const data::Dataset& d, ProgressReporter& progress, const std::function<bool()>& stop = {},
               const TrainOptions& options = test::tiny_train_options()) {
  auto model = model::build_model(test::tiny_model_options(d), 7);
  Trainer trainer(model, test::shared(d), options, kCpu);
  auto result = trainer.fit(progress, stop);
  return {result, trainer.state(), trainer.best_weights()};
}

TEST(Trainer, SameSeedGivesBitIdenticalLossesAndWeights) {
  auto d = test::tiny_dataset();
  ProgressReporter quiet;
  auto a = train_once(d, quiet);
  auto b = train_once(d, quiet);
  ASSERT_EQ(a.state.history.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(a.state.history[e]["train_loss"].get<double>(), b.state.history[e]["train_loss"].get<double>());
    EXPECT_EQ(a.state.history[e]["val_loss"].get<double>(), b.state.history[e]["val_loss"].get<double>());
  }
  expect_bitwise_equal(a.state.current_weights, b.state.current_weights);
  expect_bitwise_equal(a.state.optimizer, b.state.optimizer);
  // Training moved the weights: the comparison above is not between two untouched models.
  auto untouched = artifact::clone_weights(*model::build_model(test::tiny_model_options(d), 7));
  EXPECT_FALSE(at::equal(untouched[0].second, a.state.current_weights[0].second));
}

// Where a stop lands, counted in polls of the stop callback: fit polls after every
// training step, once before an epoch's validation pass and after every validation batch
// (tiny_train_options: 6 steps an epoch). Mid-epoch 2; after epoch 1's last step; during
// epoch 1's validation pass.
struct StopPoint {
  int poll;
  int64_t epochs_completed, batches_done;
};

class ResumeAfterStop : public ::testing::TestWithParam<StopPoint> {};

TEST_P(ResumeAfterStop, ContinuesBitForBitAsIfNeverStopped) {
  auto d = test::tiny_dataset();
  ProgressReporter quiet;
  auto straight = train_once(d, quiet);

  // Stop, save a checkpoint file, load it into fresh objects, continue.
  const auto point = GetParam();
  int polls = 0;
  auto interrupted = train_once(d, quiet, [&] { return ++polls == point.poll; });
  ASSERT_TRUE(interrupted.result.interrupted);
  EXPECT_EQ(interrupted.state.epochs_completed, point.epochs_completed);
  EXPECT_EQ(interrupted.state.batches_done_in_epoch, point.batches_done);
  test::TempDir dir;
  auto path = dir.file("checkpoint.safetensors");
  artifact::save_model_file(
      path, {test::tiny_model_options(d), d.schema(), d.options(), interrupted.best, interrupted.state});

  auto loaded = artifact::load_model(path, kCpu);
  Trainer resumed(loaded.model, test::shared(d), test::tiny_train_options(), kCpu);
  resumed.resume_from(*loaded.file.training, loaded.file.weights);
  auto result = resumed.fit(quiet);
  EXPECT_FALSE(result.interrupted);
  auto state = resumed.state();
  expect_bitwise_equal(state.current_weights, straight.state.current_weights);
  expect_bitwise_equal(state.optimizer, straight.state.optimizer);
  expect_bitwise_equal(resumed.best_weights(), straight.best);
  ASSERT_EQ(state.history.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(state.history[e]["train_loss"].get<double>(), straight.state.history[e]["train_loss"].get<double>());
  }
}

INSTANTIATE_TEST_SUITE_P(Trainer, ResumeAfterStop,
                         ::testing::Values(StopPoint{12, 1, 4}, StopPoint{6, 0, 6}, StopPoint{8, 0, 6}));

TEST(Trainer, Bf16ResumesBitForBitAsIfNeverStopped) {
  if (!this_cpu_bf16_features().any()) GTEST_SKIP() << "this CPU has neither avx512_bf16 nor amx_bf16";
  auto d = test::tiny_dataset();
  ProgressReporter quiet;
  auto options = test::tiny_train_options();
  options.precision = Precision::Bf16;
  auto straight = train_once(d, quiet, {}, options);
  // bf16 products: a run of its own, not the FP32 one under another name.
  auto fp32 = train_once(d, quiet);
  EXPECT_NE(straight.state.history[0]["train_loss"].get<double>(), fp32.state.history[0]["train_loss"].get<double>());
  for (const auto& [name, weight] : straight.state.current_weights) EXPECT_EQ(weight.scalar_type(), at::kFloat) << name;

  int polls = 0;
  auto interrupted = train_once(
      d, quiet, [&] { return ++polls == 12; }, options);
  ASSERT_TRUE(interrupted.result.interrupted);
  test::TempDir dir;
  auto path = dir.file("checkpoint.safetensors");
  artifact::save_model_file(
      path, {test::tiny_model_options(d), d.schema(), d.options(), interrupted.best, interrupted.state});
  auto loaded = artifact::load_model(path, kCpu);
  // The saved run's options, as --resume reads them: the precision comes back with them.
  const auto saved = train_options_from_json(loaded.file.training->config, options);
  EXPECT_EQ(saved.precision, Precision::Bf16);
  Trainer resumed(loaded.model, test::shared(d), saved, kCpu);
  resumed.resume_from(*loaded.file.training, loaded.file.weights);
  ASSERT_FALSE(resumed.fit(quiet).interrupted);
  expect_bitwise_equal(resumed.state().current_weights, straight.state.current_weights);
  expect_bitwise_equal(resumed.state().optimizer, straight.state.optimizer);
  expect_bitwise_equal(resumed.best_weights(), straight.best);
}

TEST(Trainer, KeepsTheBestEpochsWeights) {
  auto d = test::tiny_dataset();
  ProgressReporter quiet;
  auto run = train_once(d, quiet);
  ASSERT_GE(run.result.best_epoch, 1);
  auto model = model::build_model(test::tiny_model_options(d), 99);
  artifact::copy_weights_into(*model, run.best, "best");
  auto metrics = eval::evaluate_model(model, d, data::Split::Validation, 64, kCpu);
  const auto& best = run.state.history[static_cast<size_t>(run.result.best_epoch - 1)];
  EXPECT_EQ(metrics.loss, best["val_loss"].get<double>());
  for (const auto& epoch : run.state.history) EXPECT_GE(epoch["val_loss"].get<double>(), metrics.loss);
}

TEST(Trainer, EarlyStoppingEndsTheRun) {
  auto d = test::tiny_dataset();
  auto options = test::tiny_train_options();
  options.epochs = 50;
  options.patience = 1;
  options.learning_rate = 0.3;  // too high to keep improving
  Trainer trainer(model::build_model(test::tiny_model_options(d), 7), test::shared(d), options, kCpu);
  ProgressReporter quiet;
  auto result = trainer.fit(quiet);
  EXPECT_TRUE(result.stopped_early);
  EXPECT_LT(result.epochs_completed, 50);
  EXPECT_EQ(result.epochs_completed, result.best_epoch + 1);
}

TEST(Trainer, RunningOutOfMemoryLeavesTheStepUntakenAndResumesBitForBit) {
  // The tracking allocator's limit stands in for a small GPU: the first step needs more than
  // is left, fails, and the run ends as on a stop, its state before that step.
  auto d = test::tiny_dataset();
  ProgressReporter quiet;
  auto straight = train_once(d, quiet);
  auto model = model::build_model(test::tiny_model_options(d), 7);
  Trainer trainer(model, test::shared(d), test::tiny_train_options(), kCpu);
  TrainResult result;
  {
    struct Lifted {
      ~Lifted() { memory::set_cpu_memory_limit(0); }
    } lifted;
    memory::set_cpu_memory_limit(memory::memory_stats(kCpu).current_bytes + 4096);
    result = trainer.fit(quiet);
  }
  ASSERT_TRUE(result.interrupted);
  EXPECT_THAT(result.out_of_memory, ::testing::HasSubstr("out of memory on cpu in epoch 1, batch 1 (step 1): "
                                                         "allocated peak "));
  EXPECT_THAT(result.out_of_memory, ::testing::HasSubstr("try --use-gradient-checkpointing"));
  const auto state = trainer.state();
  EXPECT_EQ(state.global_step, 0);
  EXPECT_EQ(state.batches_done_in_epoch, 0);
  EXPECT_TRUE(test::bitwise_equal(state.cpu_rng_state, memory::RandomStream(test::tiny_train_options().seed).state()))
      << "the failed step's draws were not given back";
  // With the memory there, the run goes on from the checkpoint as if nothing had failed.
  test::TempDir dir;
  const auto path = dir.file("oom.safetensors");
  artifact::save_model_file(path,
                            {test::tiny_model_options(d), d.schema(), d.options(), trainer.best_weights(), state});
  auto loaded = artifact::load_model(path, kCpu);
  Trainer resumed(loaded.model, test::shared(d), test::tiny_train_options(), kCpu);
  resumed.resume_from(*loaded.file.training, loaded.file.weights);
  EXPECT_FALSE(resumed.fit(quiet).interrupted);
  expect_bitwise_equal(resumed.state().current_weights, straight.state.current_weights);
  expect_bitwise_equal(resumed.state().optimizer, straight.state.optimizer);
}

TEST(Trainer, LeavesTheProcesssRandomStreamAlone) {
  // Building, training and loading draw from streams of their own: the default generator
  // is where the caller left it, and a run's numbers do not depend on it.
  auto d = test::tiny_dataset();
  ProgressReporter quiet;
  torch::manual_seed(123);
  const auto before = at::detail::getDefaultCPUGenerator().get_state();
  auto a = train_once(d, quiet);
  EXPECT_TRUE(test::bitwise_equal(at::detail::getDefaultCPUGenerator().get_state(), before));
  torch::manual_seed(456);
  auto b = train_once(d, quiet);
  expect_bitwise_equal(a.state.current_weights, b.state.current_weights);
}

}  // namespace
}  // namespace qtft::train
