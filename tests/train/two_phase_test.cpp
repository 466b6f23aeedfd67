// The QAT recipe that starts from FP32: how --two-phase splits the epochs, a trainer that
// pauses and one that takes over, and a two-phase run stopped in either phase (or between
// them) that resumes to the model of the run never stopped, bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "memory/bitwise.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"
#include "qtft/train/workflow.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

using ::testing::HasSubstr;
const c10::Device kCpu(c10::kCPU);

QatRecipe two_phase_recipe() {
  QatRecipe r;
  r.two_phase = true;
  return r;
}

TrainOptions with_epochs(int64_t epochs) {
  TrainOptions t;
  t.epochs = epochs;
  return t;
}

TEST(TwoPhasePlan, SplitsTheEpochsAsDocumented) {
  auto recipe = two_phase_recipe();
  auto plan = plan_two_phase(recipe, with_epochs(2), false);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->fp32_epochs, 1);
  EXPECT_EQ(plan->qat_epochs, 1);
  EXPECT_EQ(plan->live_epochs, 0.5);     // half of the fine-tuning's steps
  EXPECT_EQ(plan->learning_rate, 1e-3);  // the run's own rate

  plan = plan_two_phase(recipe, with_epochs(50), false);
  EXPECT_EQ(plan->fp32_epochs, 38);  // a quarter of 50, rounded down, fine-tunes
  EXPECT_EQ(plan->qat_epochs, 12);
  EXPECT_EQ(plan->live_epochs, 6);

  recipe.live_epochs = 0.5;  // fits in the default share
  EXPECT_EQ(plan_two_phase(recipe, with_epochs(2), false)->qat_epochs, 1);
  recipe.live_epochs = 2;  // the QAT share grows to leave a frozen epoch
  plan = plan_two_phase(recipe, with_epochs(5), false);
  EXPECT_EQ(plan->fp32_epochs, 2);
  EXPECT_EQ(plan->qat_epochs, 3);
  EXPECT_EQ(plan->live_epochs, 2);

  recipe = two_phase_recipe();
  recipe.qat_epochs = 4;
  recipe.fine_tune_lr_scale = 0.5;
  plan = plan_two_phase(recipe, with_epochs(10), false);
  EXPECT_EQ(plan->fp32_epochs, 6);
  EXPECT_EQ(plan->qat_epochs, 4);
  EXPECT_EQ(plan->learning_rate, 1e-3 * 0.5);

  // A loaded FP32 model is the FP32 phase: every epoch fine-tunes.
  plan = plan_two_phase(two_phase_recipe(), with_epochs(10), true);
  EXPECT_EQ(plan->fp32_epochs, 0);
  EXPECT_EQ(plan->qat_epochs, 10);
  EXPECT_EQ(plan->live_epochs, 5);

  recipe = two_phase_recipe();
  recipe.start = QatStart::Scratch;
  EXPECT_FALSE(plan_two_phase(recipe, with_epochs(10), false));
  EXPECT_FALSE(plan_two_phase(QatRecipe{}, with_epochs(10), false));
}

TEST(TwoPhasePlan, FineTuningOptionsFreezeAtTheRunsEpoch) {
  auto plan = *plan_two_phase(two_phase_recipe(), with_epochs(8), false);  // 6 + 2, live 1
  auto options = plan.fine_tuning(with_epochs(8));
  EXPECT_EQ(options.freeze_observers_after_epochs, 7);  // epochs are numbered through both phases
  plan.live_epochs = 0.25;
  EXPECT_EQ(plan.fine_tuning(with_epochs(8)).freeze_observers_after_epochs, 6.25);
  EXPECT_EQ(options.learning_rate, plan.learning_rate);
  EXPECT_EQ(options.epochs, 8);
  plan.live_epochs = 0;  // frozen at calibration, not by the trainer
  EXPECT_EQ(plan.fine_tuning(with_epochs(8)).freeze_observers_after_epochs, 0);
  plan.live_epochs = 2;  // live throughout
  EXPECT_EQ(plan.fine_tuning(with_epochs(8)).freeze_observers_after_epochs, 0);
}

TEST(TwoPhasePlan, RefusesSplitsThatLeaveAPhaseEmptyNamingTheFlag) {
  auto expect_usage_error = [](QatRecipe recipe, int64_t epochs, bool loaded, const std::string& flag) {
    try {
      plan_two_phase(recipe, with_epochs(epochs), loaded);
      ADD_FAILURE() << "no error for " << flag;
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr(flag));
    }
  };
  expect_usage_error(two_phase_recipe(), 1, false, "--epochs 2 or more");
  auto recipe = two_phase_recipe();
  recipe.qat_epochs = 2;
  expect_usage_error(recipe, 2, false, "--qat-epochs must be between 1 and --epochs - 1 (1), got 2");
  expect_usage_error(recipe, 10, true, "drop --qat-epochs");
  recipe = two_phase_recipe();
  recipe.qat_epochs = 1;
  recipe.live_epochs = 1;
  expect_usage_error(recipe, 4, false, "--qat-live-epochs must leave part of the 1 QAT epochs frozen, got 1");
  recipe.live_epochs = -2;
  expect_usage_error(recipe, 4, false, "--qat-live-epochs must not be negative");
  recipe = two_phase_recipe();
  recipe.fine_tune_lr_scale = 0;
  expect_usage_error(recipe, 4, false, "--qat-lr-scale");
}

TEST(TwoPhasePlan, RoundTripsThroughJson) {
  auto plan = *plan_two_phase(two_phase_recipe(), with_epochs(9), false);
  auto back = two_phase_plan_from_json(to_json(plan));
  EXPECT_EQ(back.fp32_epochs, plan.fp32_epochs);
  EXPECT_EQ(back.qat_epochs, plan.qat_epochs);
  EXPECT_EQ(back.live_epochs, plan.live_epochs);
  EXPECT_EQ(back.learning_rate, plan.learning_rate);
  EXPECT_EQ(back.calibration_batches, plan.calibration_batches);
  auto broken = to_json(plan);
  broken.erase("qat_epochs");
  EXPECT_THROW(two_phase_plan_from_json(broken), Error);
}

void expect_bitwise_equal(const artifact::NamedTensors& a, const artifact::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(test::bitwise_equal(a[i].second, b[i].second)) << a[i].first;
  }
}

// The epochs' losses and rates (the history also holds timings, which differ run to run).
void expect_same_losses(const nlohmann::json& a, const nlohmann::json& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t e = 0; e < a.size(); ++e) {
    for (const char* key : {"train_loss", "val_loss", "learning_rate"}) {
      EXPECT_EQ(a[e][key].get<double>(), b[e][key].get<double>()) << "epoch " << e + 1 << " " << key;
    }
  }
}

TEST(Trainer, APausedRunContinuedIsTheRunNeverPaused) {
  auto d = test::shared(test::tiny_dataset());
  ProgressReporter quiet;
  auto whole_model = model::build_model(test::tiny_model_options(*d), 7);
  Trainer whole(whole_model, d, test::tiny_train_options(), kCpu);
  whole.fit(quiet);

  auto paused_model = model::build_model(test::tiny_model_options(*d), 7);
  Trainer paused(paused_model, d, test::tiny_train_options(), kCpu);
  paused.pause_after_epoch(1);
  auto first = paused.fit(quiet);
  EXPECT_TRUE(first.paused);
  EXPECT_EQ(first.epochs_completed, 1);
  EXPECT_FALSE(paused.state().finished);
  EXPECT_TRUE(paused.fit(quiet).paused);  // still paused: nothing more trained
  EXPECT_EQ(paused.state().global_step, 6);
  paused.pause_after_epoch(0);
  auto rest = paused.fit(quiet);
  EXPECT_FALSE(rest.paused);
  EXPECT_EQ(rest.epochs_completed, 3);
  expect_bitwise_equal(paused.state().current_weights, whole.state().current_weights);
  expect_bitwise_equal(paused.best_weights(), whole.best_weights());
  expect_same_losses(paused.state().history, whole.state().history);
}

TEST(Trainer, AQatPhaseTakesOverTheEpochsStepsAndHistoryOfTheFp32Phase) {
  auto d = test::shared(test::tiny_dataset());
  ProgressReporter quiet;
  auto fp32 = model::build_model(test::tiny_model_options(*d), 7);
  const auto options = test::tiny_train_options();  // 3 epochs of 6 batches
  Trainer fp32_trainer(fp32, d, options, kCpu);
  fp32_trainer.pause_after_epoch(2);
  fp32_trainer.fit(quiet);

  TwoPhasePlan plan;
  plan.fp32_epochs = 2;
  plan.qat_epochs = 1;
  plan.live_epochs = 0;
  plan.learning_rate = 3e-4;
  plan.calibration_batches = 4;
  TrainingEvents events;
  auto phase = start_qat_phase(fp32->options(), fp32_trainer.best_weights(), fp32_trainer.state(), plan, options, d,
                               kCpu, nullptr, events);
  ASSERT_TRUE(phase.model->options().use_qat());
  EXPECT_TRUE(quant::observers_frozen(*phase.model));
  // The QAT model starts from the FP32 phase's best weights.
  for (const auto& [name, t] : fp32_trainer.best_weights()) {
    EXPECT_TRUE(test::bitwise_equal(t, phase.model->named_parameters(true).contains(name)
                                           ? phase.model->named_parameters(true)[name]
                                           : phase.model->named_buffers(true)[name]))
        << name;
  }
  auto result = phase.trainer->fit(quiet);
  EXPECT_EQ(result.epochs_completed, 3);  // one more epoch: the third of the run
  EXPECT_EQ(result.best_epoch, 3);        // chosen among the QAT phase's epochs only
  const auto state = phase.trainer->state();
  EXPECT_EQ(state.global_step, 18);
  ASSERT_EQ(state.history.size(), 3u);
  EXPECT_EQ(state.history[1]["val_loss"].get<double>(), fp32_trainer.state().history[1]["val_loss"].get<double>());
  EXPECT_EQ(state.history[2]["learning_rate"].get<double>(), 3e-4);
  for (const auto& s : quant::observer_stats(*phase.model)) EXPECT_EQ(s.samples, 4) << s.name;  // frozen at once
}

// The two-phase workflow on a CSV of bars: 3 epochs, the last one QAT, frozen at calibration.
class TwoPhaseRun : public ::testing::Test {
 protected:
  void SetUp() override {
    csv_ = dir_.file("bars.csv");
    std::ofstream(csv_) << test::regular_bars_csv(700);
    source_.csv_file = csv_;
    setup_.dataset.encoder_length = 12;
    setup_.dataset.horizon = 3;
    setup_.architecture.hidden_size = 8;
    setup_.architecture.attention_heads = 2;
    setup_.qat = two_phase_recipe();
    setup_.qat.calibration_batches = 3;
    setup_.train = test::tiny_train_options();
  }

  struct Outcome {
    TrainResult result;
    artifact::ModelFile file;
  };
  Outcome run(TrainingSetup setup, const std::function<bool()>& stop, TrainingEvents& events) {
    auto prepared = prepare_training(source_, std::move(setup), events);
    ProgressReporter quiet;
    auto result = fit_training(prepared, quiet, events, stop);
    return {result, training_model_file(prepared)};
  }
  Outcome run(const std::function<bool()>& stop = {}) {
    TrainingEvents events;
    return run(setup_, stop, events);
  }
  // Saves an interrupted run and resumes it to the end.
  artifact::ModelFile resume(const artifact::ModelFile& interrupted) {
    const auto path = dir_.file("interrupted.safetensors");
    artifact::save_model_file(path, interrupted);
    auto setup = setup_;
    setup.load_model = path;
    setup.resume = true;
    TrainingEvents events;
    return run(setup, {}, events).file;
  }

  test::TempDir dir_;
  std::string csv_;
  data::BarSource source_;
  TrainingSetup setup_;
};

TEST_F(TwoPhaseRun, TrainsFp32ThenFineTunesAQuantizedModel) {
  struct Recorder : TrainingEvents {
    void two_phase_planned(const TwoPhasePlan& p) override { planned = p.describe(); }
    void qat_phase_started(const TwoPhasePlan&, int64_t best) override { fp32_best = best; }
    std::string planned;
    int64_t fp32_best = -1;
  } events;
  auto outcome = run(setup_, {}, events);
  EXPECT_EQ(events.planned,
            "Two-phase QAT from FP32: 2 epochs FP32, then 1 epoch of QAT fine-tuning (8-bit weights, 8-bit "
            "activations) at learning rate 0.003, observers calibrated on the trained model over 3 batches, live "
            "for 0.5 epochs, then frozen");
  EXPECT_GE(events.fp32_best, 1);
  EXPECT_TRUE(outcome.file.options.use_qat());
  // Frozen after the third of the fine-tuning's six steps.
  auto loaded = artifact::model_from_file(outcome.file, "two-phase run", kCpu);
  for (const auto& s : quant::observer_stats(*loaded.model)) {
    EXPECT_TRUE(s.frozen) << s.name;
    EXPECT_EQ(s.samples, 3 + 3) << s.name;
  }
  EXPECT_EQ(outcome.result.best_epoch, 3);
  EXPECT_EQ(outcome.file.training->history.size(), 3u);
  EXPECT_FALSE(outcome.file.training->config.contains("qat_phase"));  // nothing left to do
}

TEST_F(TwoPhaseRun, StoppedInEitherPhaseOrBetweenThemResumesToTheSameModel) {
  const auto whole = run().file;
  // Polls come after every step, during validation and during calibration; counted from
  // the start of the run (the 4th: a step of FP32 epoch 1) or from the QAT phase's start
  // (the 6th: 3 calibration batches, then the fine-tuning's 3rd step).
  struct StopAfterPolls : TrainingEvents {
    void qat_phase_started(const TwoPhasePlan&, int64_t) override { in_qat = true; }
    bool in_qat = false;
  };
  for (bool in_qat_phase : {false, true}) {
    SCOPED_TRACE(in_qat_phase);
    StopAfterPolls events;
    int seen = 0;
    auto stopped = run(
        setup_, [&] { return (events.in_qat || !in_qat_phase) && ++seen >= (in_qat_phase ? 6 : 4); }, events);
    ASSERT_TRUE(stopped.result.interrupted);
    EXPECT_EQ(stopped.file.options.use_qat(), in_qat_phase);
    EXPECT_EQ(stopped.file.training->config.contains("qat_phase"), !in_qat_phase);
    EXPECT_EQ(stopped.file.training->global_step, in_qat_phase ? 15 : 4);
    auto resumed = resume(stopped.file);
    expect_bitwise_equal(resumed.weights, whole.weights);
    expect_same_losses(resumed.training->history, whole.training->history);
  }
  // Stopped while the QAT phase calibrates: the FP32 phase is kept and resumes into it.
  struct StopAtQuantization : TrainingEvents {
    void qat_phase_started(const TwoPhasePlan&, int64_t) override { stop = true; }
    bool stop = false;
  } events;
  auto stopped = run(
      setup_, [&] { return events.stop; }, events);
  ASSERT_TRUE(stopped.result.interrupted);
  EXPECT_FALSE(stopped.file.options.use_qat());
  EXPECT_EQ(stopped.file.training->epochs_completed, 2);
  auto resumed = resume(stopped.file);
  expect_bitwise_equal(resumed.weights, whole.weights);
}

}  // namespace
}  // namespace qtft::train
