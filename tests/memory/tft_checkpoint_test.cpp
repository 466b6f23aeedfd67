// Checkpointing the whole TFT: every policy trains bitwise like no checkpointing, with QAT
// observers live or frozen and without QAT, dropout on.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "memory/bitwise.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/cpu_features.h"
#include "qtft/data/features/batch.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/train_step.h"
#include "support/tiny_model.h"

namespace qtft::memory {

// Test names that say which policy ran, in gtest's and ctest's output.
void PrintTo(CheckpointPolicy policy, std::ostream* out) { *out << checkpoint_policy_name(policy); }

namespace {

using test::bitwise_equal;
const c10::Device kCpu(c10::kCPU);

// QatStep: live observers updated once at each step's end (--observer-update step).
enum class Quant { Fp32, QatLive, QatFrozen, QatStep };
const char* const kQuantNames[] = {"Fp32", "QatLive", "QatFrozen", "QatStep"};
void PrintTo(Quant quant, std::ostream* out) { *out << kQuantNames[static_cast<int>(quant)]; }

struct TrainingRun {
  std::vector<at::Tensor> losses;
  std::vector<std::pair<std::string, at::Tensor>> state;  // parameters, buffers, optimizer
  std::vector<std::string> params_without_grad;
  at::Tensor rng_after;
};

TrainingRun train_steps(Quant quant, CheckpointPolicy policy, int steps = 3, int64_t lstm_layers = 1,
                        bool declared = false, bool narrow_inputs = false, Precision precision = Precision::Fp32) {
  const data::Dataset d = declared ? test::tiny_declared_dataset() : test::tiny_dataset();
  model::TftOptions options = test::tiny_model_options(d);
  options.dropout(0.2).use_qat(quant != Quant::Fp32).lstm_layers(lstm_layers);
  if (narrow_inputs) options.variable_hidden_size(options.hidden_size() / 2);
  auto model = model::build_model(options, 7);
  model->set_precision(precision);
  const auto update = quant == Quant::QatStep ? quant::ObserverUpdate::Step : quant::ObserverUpdate::Immediate;
  if (quant != Quant::Fp32) train::calibrate_observers(model, d, 2, 16, 42, kCpu, {}, update);
  if (quant == Quant::QatFrozen) quant::freeze_observers(*model);
  quant::set_observer_update(*model, update);
  model->set_checkpoint_policy(policy);
  model->train();
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  torch::manual_seed(5);
  TrainingRun run;
  for (int s = 0; s < steps; ++s) {
    std::vector<size_t> indices;
    for (size_t i = 0; i < 16; ++i) indices.push_back(static_cast<size_t>(s) * 16 + i);
    const auto batch = data::make_batch(d, data::Split::Train, indices);
    run.losses.push_back(train::training_step(model, optimizer, batch, 1.0, kCpu));
    if (update == quant::ObserverUpdate::Step) quant::end_observer_step(*model, quant::step_extremes(*model));
  }
  for (const auto& p : model->named_parameters()) {
    run.state.emplace_back(p.key(), p.value().detach().clone());
    if (!p.value().grad().defined()) run.params_without_grad.push_back(p.key());
    const auto it = optimizer.state().find(p.value().unsafeGetTensorImpl());
    if (it == optimizer.state().end()) continue;
    const auto& st = static_cast<const torch::optim::AdamParamState&>(*it->second);
    run.state.emplace_back(p.key() + ".exp_avg", st.exp_avg());
    run.state.emplace_back(p.key() + ".exp_avg_sq", st.exp_avg_sq());
  }
  for (const auto& b : model->named_buffers()) run.state.emplace_back(b.key(), b.value().clone());
  run.rng_after = at::detail::getDefaultCPUGenerator().get_state();
  return run;
}

void expect_bit_identical(const TrainingRun& expected, const TrainingRun& actual) {
  ASSERT_EQ(expected.losses.size(), actual.losses.size());
  for (size_t i = 0; i < expected.losses.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(expected.losses[i], actual.losses[i]))
        << "step " << i << ": " << expected.losses[i].item<float>() << " vs " << actual.losses[i].item<float>();
  }
  ASSERT_EQ(expected.state.size(), actual.state.size());
  int differing = 0;
  for (size_t i = 0; i < expected.state.size(); ++i) {
    ASSERT_EQ(expected.state[i].first, actual.state[i].first);
    if (!bitwise_equal(expected.state[i].second, actual.state[i].second)) {
      ADD_FAILURE() << expected.state[i].first << " differs";
      if (++differing > 10) break;
    }
  }
  EXPECT_TRUE(bitwise_equal(expected.rng_after, actual.rng_after)) << "the random stream after training moved";
  EXPECT_TRUE(actual.params_without_grad.empty()) << actual.params_without_grad.front() << " got no gradient";
}

class TftCheckpoint : public ::testing::TestWithParam<std::tuple<Quant, CheckpointPolicy>> {};

TEST_P(TftCheckpoint, TrainsBitIdenticallyToNoCheckpointing) {
  const auto [quant, policy] = GetParam();
  const TrainingRun reference = train_steps(quant, CheckpointPolicy::None);
  expect_bit_identical(reference, train_steps(quant, policy));
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Quant, CheckpointPolicy>>& info) {
  std::string policy = checkpoint_policy_name(std::get<1>(info.param));
  policy[0] = static_cast<char>(std::toupper(policy[0]));
  return std::string(kQuantNames[static_cast<int>(std::get<0>(info.param))]) + policy;
}

INSTANTIATE_TEST_SUITE_P(Policies, TftCheckpoint,
                         ::testing::Combine(::testing::Values(Quant::Fp32, Quant::QatLive, Quant::QatFrozen,
                                                              Quant::QatStep),
                                            ::testing::Values(CheckpointPolicy::Blocks, CheckpointPolicy::Lstm)),
                         case_name);

TEST(TftCheckpoint, NarrowInputsTrainBitIdentically) {
  // --variable-hidden-size below the hidden size: narrower embeddings and GRNs, and the
  // selected sums projected, with declared categoricals embedded at the narrow width too.
  for (const Quant quant : {Quant::Fp32, Quant::QatLive, Quant::QatStep}) {
    const TrainingRun reference = train_steps(quant, CheckpointPolicy::None, 2, 1, true, true);
    expect_bit_identical(reference, train_steps(quant, CheckpointPolicy::Blocks, 2, 1, true, true));
  }
}

TEST(TftCheckpoint, DeclaredStaticsAndCategoricalsTrainBitIdentically) {
  // Static reals and categoricals, observed and known categoricals: their embeddings and
  // observers recompute as the real inputs' do.
  for (const Quant quant : {Quant::Fp32, Quant::QatLive}) {
    const TrainingRun reference = train_steps(quant, CheckpointPolicy::None, 2, 1, true);
    expect_bit_identical(reference, train_steps(quant, CheckpointPolicy::Blocks, 2, 1, true));
  }
}

TEST(TftCheckpoint, TwoLayerLstmDrawsTheSameDropoutBetweenLayers) {
  // Dropout inside at::lstm, in every encoder chunk the lstm policy recomputes.
  const TrainingRun reference = train_steps(Quant::QatLive, CheckpointPolicy::None, 2, 2);
  expect_bit_identical(reference, train_steps(Quant::QatLive, CheckpointPolicy::Lstm, 2, 2));
  expect_bit_identical(reference, train_steps(Quant::QatLive, CheckpointPolicy::Blocks, 2, 2));
}

// --precision bf16: the recompute multiplies in bf16 as the forward did (the checkpoint
// puts the forward's autocast settings back), so every policy still trains bit for bit.
class TftCheckpointBf16 : public ::testing::TestWithParam<std::tuple<Quant, CheckpointPolicy>> {};

TEST_P(TftCheckpointBf16, TrainsBitIdenticallyToNoCheckpointing) {
  if (!this_cpu_bf16_features().any()) GTEST_SKIP() << "this CPU has neither avx512_bf16 nor amx_bf16";
  const auto [quant, policy] = GetParam();
  const TrainingRun reference = train_steps(quant, CheckpointPolicy::None, 2, 2, false, false, Precision::Bf16);
  expect_bit_identical(reference, train_steps(quant, policy, 2, 2, false, false, Precision::Bf16));
  // The products did run in bf16: the FP32 run of the same steps ends elsewhere.
  const TrainingRun fp32 = train_steps(quant, CheckpointPolicy::None, 2, 2);
  EXPECT_FALSE(bitwise_equal(reference.losses.back(), fp32.losses.back()));
  EXPECT_NEAR(reference.losses.back().item<float>(), fp32.losses.back().item<float>(),
              0.05 * std::abs(fp32.losses.back().item<float>()));
}

INSTANTIATE_TEST_SUITE_P(Policies, TftCheckpointBf16,
                         ::testing::Combine(::testing::Values(Quant::Fp32, Quant::QatLive, Quant::QatStep),
                                            ::testing::Values(CheckpointPolicy::Blocks, CheckpointPolicy::Lstm)),
                         case_name);

TEST(TftCheckpoint, LiveObserversCountEachStepOnce) {
  for (const Quant quant : {Quant::QatLive, Quant::QatStep}) {
    const TrainingRun checkpointed = train_steps(quant, CheckpointPolicy::Lstm, 2);
    int observers = 0;
    for (const auto& [name, value] : checkpointed.state) {
      // 2 calibration batches + 2 training steps: the recompute in each step adds nothing.
      if (!name.ends_with(".samples")) continue;
      ++observers;
      EXPECT_EQ(value.template item<int64_t>(), 4) << kQuantNames[static_cast<int>(quant)] << " " << name;
    }
    EXPECT_GT(observers, 100);
  }
}

}  // namespace
}  // namespace qtft::memory
