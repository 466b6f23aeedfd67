// Memory of a training step, measured from real tensors: the rows that follow from the
// parameter count exactly, the caller's random stream left alone, and repeatable figures.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <numeric>

#include "memory/bitwise.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/data/features/batch.h"
#include "qtft/memory/memory_tracker.h"
#include "qtft/model/model_building.h"
#include "qtft/train/step_memory.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

const c10::Device kCpu(c10::kCPU);
using memory::CheckpointPolicy;

data::Batch tiny_batch(const data::Dataset& d, size_t size = 16) {
  std::vector<size_t> indices(size);
  std::iota(indices.begin(), indices.end(), size_t{0});
  return data::make_batch(d, data::Split::Train, indices);
}

StepMemory measure(const model::TftOptions& options, CheckpointPolicy policy = CheckpointPolicy::None) {
  auto d = test::tiny_dataset();
  return measure_training_step(options, 7, tiny_batch(d), test::tiny_train_options(), policy, kCpu, 1);
}

TEST(StepMemory, ParameterRowsFollowFromTheParameterCount) {
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  const int64_t float_bytes = 4 * model::count_parameters(*model::TemporalFusionTransformer(options));
  auto m = measure(options);
  EXPECT_EQ(m.weights_bytes, float_bytes);
  EXPECT_EQ(m.gradients_bytes, float_bytes);      // every parameter has a float gradient
  EXPECT_EQ(m.optimizer_bytes, 2 * float_bytes);  // Adam: exp_avg and exp_avg_sq
  EXPECT_EQ(m.observer_bytes, 0);                 // no QAT, no observers
  EXPECT_GT(m.activation_peak_bytes, 0);
  EXPECT_GE(m.total_peak_bytes, m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.activation_peak_bytes);
  EXPECT_GT(m.step_seconds, 0.0);
}

TEST(StepMemory, QatObserversAreCounted) {
  auto d = test::tiny_dataset();
  auto m = measure(test::tiny_model_options(d).use_qat(true));
  EXPECT_GT(m.observer_bytes, 0);
  EXPECT_GE(m.total_peak_bytes, m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.observer_bytes);
}

TEST(StepMemory, LeavesTheCallersRandomStreamUnchanged) {
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  auto batch = tiny_batch(d);
  auto generator = at::detail::getDefaultCPUGenerator();
  generator.set_current_seed(1234);
  auto before = generator.get_state();
  measure_training_step(options, 7, batch, test::tiny_train_options(), CheckpointPolicy::None, kCpu, 1);
  EXPECT_TRUE(test::bitwise_equal(generator.get_state(), before));
}

TEST(StepMemory, SameConfigurationGivesTheSameBytes) {
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  for (auto policy : {CheckpointPolicy::None, CheckpointPolicy::Blocks}) {
    auto a = measure(options, policy), b = measure(options, policy);
    EXPECT_EQ(a.weights_bytes, b.weights_bytes);
    EXPECT_EQ(a.gradients_bytes, b.gradients_bytes);
    EXPECT_EQ(a.optimizer_bytes, b.optimizer_bytes);
    EXPECT_EQ(a.observer_bytes, b.observer_bytes);
    EXPECT_EQ(a.activation_peak_bytes, b.activation_peak_bytes);
    EXPECT_EQ(a.total_peak_bytes, b.total_peak_bytes);
  }
}

TEST(StepMemory, ReportComparesAgainstNoCheckpointing) {
  auto d = test::tiny_dataset();
  auto r = measure_memory_report(test::tiny_model_options(d), 7, tiny_batch(d), test::tiny_train_options(),
                                 CheckpointPolicy::Blocks, kCpu, 1);
  EXPECT_EQ(r.without.weights_bytes, r.with.weights_bytes);
  auto j = to_json(r);
  EXPECT_EQ(j.at("policy"), "blocks");
  EXPECT_EQ(j.at("without").at("total_peak_bytes").get<int64_t>(), r.without.total_peak_bytes);
  EXPECT_EQ(j.at("savings").at("total_peak_bytes").get<int64_t>(),
            r.without.total_peak_bytes - r.with.total_peak_bytes);
  EXPECT_DOUBLE_EQ(j.at("step_time_ratio").get<double>(), r.with.step_seconds / r.without.step_seconds);
  auto table = format_memory_report(r);
  for (const char* row : {"without checkpointing", "with blocks", "saved", "model weights", "gradients",
                          "optimizer state", "QAT observers", "activation peak", "total peak", "step time"}) {
    EXPECT_NE(table.find(row), std::string::npos) << row << "\n" << table;
  }
}

TEST(StepMemory, CheckpointingLowersTheActivationPeak) {
  // The promise itself, not only that figures exist: both policies keep less than none.
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d).use_qat(true);
  auto none = measure(options, CheckpointPolicy::None);
  for (auto policy : {CheckpointPolicy::Blocks, CheckpointPolicy::Lstm}) {
    auto with = measure(options, policy);
    EXPECT_LT(with.activation_peak_bytes, none.activation_peak_bytes) << memory::checkpoint_policy_name(policy);
    EXPECT_LT(with.total_peak_bytes, none.total_peak_bytes) << memory::checkpoint_policy_name(policy);
    EXPECT_EQ(with.weights_bytes, none.weights_bytes);
  }
}

TEST(StepMemory, AStepThatRunsOutOfMemoryIsAnAnswerNotAnError) {
  const auto d = test::tiny_dataset();
  const auto batch = tiny_batch(d);
  const auto fits = measure_training_step(test::tiny_model_options(d), 7, batch, test::tiny_train_options(),
                                          CheckpointPolicy::None, kCpu, 1);
  EXPECT_FALSE(fits.out_of_memory);
  EXPECT_EQ(fits.reserved_peak_bytes, fits.total_peak_bytes);
  StepMemory short_of_memory;
  {
    struct Lifted {
      ~Lifted() { memory::set_cpu_memory_limit(0); }
    } lifted;
    memory::set_cpu_memory_limit(memory::memory_stats(kCpu).current_bytes + fits.total_peak_bytes / 2);
    short_of_memory = measure_training_step(test::tiny_model_options(d), 7, batch, test::tiny_train_options(),
                                            CheckpointPolicy::None, kCpu, 1);
  }
  EXPECT_TRUE(short_of_memory.out_of_memory);
  EXPECT_EQ(short_of_memory.step_seconds, 0.0);
  EXPECT_GT(short_of_memory.total_peak_bytes, 0);
  EXPECT_LE(short_of_memory.total_peak_bytes, fits.total_peak_bytes / 2);
  MemoryReport report{CheckpointPolicy::Blocks, short_of_memory, fits};
  EXPECT_EQ(report.step_time_ratio(), 0.0);
  EXPECT_TRUE(to_json(report).at("without").at("out_of_memory").get<bool>());
  EXPECT_NE(format_memory_report(report).find("out of memory"), std::string::npos);
}

TEST(StepMemory, RejectsAnUnresolvedAutoPolicy) {
  auto d = test::tiny_dataset();
  EXPECT_THROW(measure(test::tiny_model_options(d), CheckpointPolicy::Auto), UsageError);
}

}  // namespace
}  // namespace qtft::train
