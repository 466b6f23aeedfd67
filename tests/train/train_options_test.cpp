// The training options' JSON: every field written and read back, so that --resume
// continues with exactly the options a run was saved with.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "qtft/common/error.h"
#include "qtft/train/train_options.h"

namespace qtft::train {
namespace {

TrainOptions unusual() {
  TrainOptions o;
  o.epochs = 7;
  o.batch_size = 33;
  o.learning_rate = 0.0025;
  o.weight_decay = 0.125;
  o.clip_norm = 0.75;
  o.lr_schedule = LrSchedule::Cosine;
  o.plateau_factor = 0.3;
  o.plateau_patience = 4;
  o.patience = 9;
  o.seed = 987654321;
  o.eval_batch_size = 77;
  o.max_batches_per_epoch = 5;
  o.freeze_observers_after_epochs = 2;
  o.observer_update = ObserverUpdateChoice::Step;
  o.checkpoint_policy = memory::CheckpointPolicy::Auto;
  o.precision = Precision::Bf16;
  o.memory_budget_bytes = 1 << 20;
  return o;
}

TEST(TrainOptionsJson, EveryFieldIsWritten) {
  auto j = to_json(unusual());
  for (const char* key :
       {"epochs", "batch_size", "learning_rate", "weight_decay", "clip_norm", "lr_schedule", "plateau_factor",
        "plateau_patience", "patience", "seed", "eval_batch_size", "max_batches_per_epoch",
        "freeze_observers_after_epochs", "observer_update", "checkpoint_policy", "memory_budget_bytes", "precision"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 17u);  // a new field shows up here
  EXPECT_EQ(j.at("observer_update"), "step");
  EXPECT_EQ(j.at("lr_schedule"), "cosine");
  EXPECT_EQ(j.at("checkpoint_policy"), "auto");
  EXPECT_EQ(j.at("precision"), "bf16");
}

TEST(TrainOptionsJson, ResumeReadsTheRunsOptionsButKeepsItsOwnEpochsAndCheckpointing) {
  TrainOptions base;
  base.epochs = 12;
  auto read = train_options_from_json(to_json(unusual()), base);
  const auto saved = unusual();
  EXPECT_EQ(read.batch_size, saved.batch_size);
  EXPECT_EQ(read.learning_rate, saved.learning_rate);
  EXPECT_EQ(read.weight_decay, saved.weight_decay);
  EXPECT_EQ(read.clip_norm, saved.clip_norm);
  EXPECT_EQ(read.lr_schedule, saved.lr_schedule);
  EXPECT_EQ(read.plateau_factor, saved.plateau_factor);
  EXPECT_EQ(read.plateau_patience, saved.plateau_patience);
  EXPECT_EQ(read.patience, saved.patience);
  EXPECT_EQ(read.seed, saved.seed);
  EXPECT_EQ(read.eval_batch_size, saved.eval_batch_size);
  EXPECT_EQ(read.max_batches_per_epoch, saved.max_batches_per_epoch);
  EXPECT_EQ(read.freeze_observers_after_epochs, saved.freeze_observers_after_epochs);
  EXPECT_EQ(read.observer_update, ObserverUpdateChoice::Step);
  EXPECT_EQ(read.precision, Precision::Bf16);  // the run's: a resume keeps it
  EXPECT_EQ(read.epochs, 12);
  EXPECT_EQ(read.checkpoint_policy, memory::CheckpointPolicy::None);
  EXPECT_EQ(read.memory_budget_bytes, 0);
}

TEST(TrainOptionsJson, ARunSavedBeforeObserverUpdateExistedContinuesUpdatingInEveryForward) {
  auto j = to_json(TrainOptions{});
  EXPECT_EQ(j.at("observer_update"), "auto");
  EXPECT_EQ(train_options_from_json(j).observer_update, ObserverUpdateChoice::Auto);
  j.erase("observer_update");
  EXPECT_EQ(train_options_from_json(j).observer_update, ObserverUpdateChoice::Immediate);
  j["observer_update"] = "sometimes";
  EXPECT_THROW(train_options_from_json(j), UsageError);
}

TEST(TrainOptionsJson, ARunSavedBeforePrecisionExistedIsFp32AndAnUnknownOneIsRefused) {
  auto j = to_json(TrainOptions{});
  EXPECT_EQ(j.at("precision"), "fp32");
  j.erase("precision");
  EXPECT_EQ(train_options_from_json(j).precision, Precision::Fp32);
  j["precision"] = "fp8";
  EXPECT_THROW(train_options_from_json(j), UsageError);
}

TEST(ObserverUpdate, AutoIsStepAcrossRanksAndImmediateAlone) {
  EXPECT_EQ(resolve_observer_update(ObserverUpdateChoice::Auto, 1), quant::ObserverUpdate::Immediate);
  EXPECT_EQ(resolve_observer_update(ObserverUpdateChoice::Auto, 2), quant::ObserverUpdate::Step);
  EXPECT_EQ(resolve_observer_update(ObserverUpdateChoice::Immediate, 4), quant::ObserverUpdate::Immediate);
  EXPECT_EQ(resolve_observer_update(ObserverUpdateChoice::Step, 1), quant::ObserverUpdate::Step);
  EXPECT_EQ(parse_observer_update("step"), ObserverUpdateChoice::Step);
  try {
    parse_observer_update("later");
    FAIL() << "expected an error";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--observer-update must be auto, immediate or step, got 'later'"));
  }
}

TEST(TrainOptionsJson, MalformedOptionsAreAClearError) {
  auto j = to_json(TrainOptions{});
  j["batch_size"] = "many";
  try {
    train_options_from_json(j);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("malformed training options"));
  }
}

}  // namespace
}  // namespace qtft::train
