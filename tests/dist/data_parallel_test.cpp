// Data-parallel training on two Gloo ranks (threads of this process, loopback): both ranks
// end with bitwise the same weights and observers, and the run matches one process taking
// the two ranks' batches as one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ops/equal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "qtft/artifact/model_loading.h"
#include "qtft/dist/collective.h"
#include "qtft/dist/detail/sharded_evaluation.h"
#include "qtft/eval/evaluate.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/trainer.h"
#include "support/loopback_ranks.h"
#include "support/tiny_model.h"

namespace qtft::dist {
namespace {

const c10::Device kCpu(c10::kCPU);

// Dropout draws from each process's own generator, so the comparison runs without it.
model::TftOptions options_for(const data::Dataset& d, bool qat) {
  auto o = test::tiny_model_options(d);
  o.dropout(0.0).use_qat(qat);
  return o;
}

train::TrainOptions train_options(size_t batch_size, int64_t batches,
                                  train::ObserverUpdateChoice update = train::ObserverUpdateChoice::Immediate) {
  auto o = test::tiny_train_options();
  o.observer_update = update;
  o.epochs = 1;
  o.batch_size = batch_size;
  o.max_batches_per_epoch = batches;
  o.checkpoint_policy = memory::CheckpointPolicy::None;
  return o;
}

// The same initial weights every time, and calibrated observers for QAT. Built on the
// calling thread: building draws from the process's generator (through a stream of its
// own that it swaps in), which two threads must not do at once.
model::TemporalFusionTransformer initial_model(const data::Dataset& d, bool qat) {
  auto model = model::build_model(options_for(d, qat), 11);
  if (qat) train::calibrate_observers(model, d, 2, 16, 1, kCpu);
  return model;
}

// The weights after training; `collectives_per_step`, when given, receives the epoch's count.
artifact::NamedTensors train(const std::shared_ptr<const data::Dataset>& d, model::TemporalFusionTransformer model,
                             size_t batch_size, int64_t batches, std::shared_ptr<Collective> group,
                             train::ObserverUpdateChoice update = train::ObserverUpdateChoice::Immediate,
                             double* collectives_per_step = nullptr) {
  train::Trainer trainer(model, d, train_options(batch_size, batches, update), kCpu);
  if (group) trainer.set_data_parallel(group);
  train::ProgressReporter quiet;
  trainer.fit(quiet);
  if (collectives_per_step) *collectives_per_step = trainer.state().history.at(0).at("collectives_per_step");
  return artifact::clone_weights(*model);
}

// Two ranks of batch_size each, one thread per rank.
std::vector<artifact::NamedTensors> train_two_ranks(
    const std::shared_ptr<const data::Dataset>& d, bool qat, size_t batch_size, int64_t batches,
    train::ObserverUpdateChoice update = train::ObserverUpdateChoice::Immediate,
    std::vector<double>* collectives_per_step = nullptr) {
  std::vector<model::TemporalFusionTransformer> models{initial_model(*d, qat), initial_model(*d, qat)};
  std::vector<artifact::NamedTensors> weights(2);
  std::vector<double> collectives(2, -1);
  const auto errors = test::run_loopback_ranks(2, [&](int64_t rank, int64_t port) {
    auto group =
        std::make_shared<Collective>(Collective::connect(test::loopback_rank(rank, 2, port), std::chrono::seconds(60)));
    weights[rank] = train(d, models[rank], batch_size, batches, group, update, &collectives[rank]);
  });
  if (collectives_per_step) *collectives_per_step = collectives;
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  return weights;
}

void expect_bitwise_equal(const artifact::NamedTensors& a, const artifact::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first;
  }
}

TEST(DataParallel, TwoRanksOfBatchBTrainAsOneProcessOfBatch2B) {
  const auto d = test::shared(test::tiny_dataset());
  const auto ranks = train_two_ranks(d, /*qat=*/false, 8, 3);
  ASSERT_EQ(ranks[0].size(), ranks[1].size());
  expect_bitwise_equal(ranks[0], ranks[1]);
  const auto single = train(d, initial_model(*d, false), 16, 3, nullptr);
  ASSERT_EQ(single.size(), ranks[0].size());
  // The same steps up to the order of float sums: the single process sums 16 rows per
  // gradient, the ranks 8 and 8 and then their mean. Three Adam steps at learning rate 3e-3
  // keep that within 1e-5.
  double worst = 0.0;
  for (size_t i = 0; i < single.size(); ++i) {
    const double diff = (single[i].second - ranks[0][i].second).abs().max().item<double>();
    EXPECT_LE(diff, 1e-5) << single[i].first;
    worst = std::max(worst, diff);
  }
  std::printf("largest difference from one process of batch 2B: %.3g\n", worst);
}

TEST(DataParallel, ObserversUpdateFromTheMinAndMaxOverAllRanks) {
  // One step: its forward sees the same weights in both runs, so every observer takes in
  // exactly the same global min and max, bit for bit.
  const auto d = test::shared(test::tiny_dataset());
  const auto ranks = train_two_ranks(d, /*qat=*/true, 8, 1);
  expect_bitwise_equal(ranks[0], ranks[1]);
  const auto single = train(d, initial_model(*d, true), 16, 1, nullptr);
  for (size_t i = 0; i < single.size(); ++i) {
    if (!quant::is_observer_state(single[i].first)) continue;
    EXPECT_TRUE(at::equal(single[i].second, ranks[0][i].second)) << single[i].first;
  }
}

TEST(DataParallel, StepObserversOfTwoRanksAreThoseOfOneProcessOfTheWholeBatchInOneCollectivePerStep) {
  // --observer-update step: the forward quantizes with the step's starting parameters, and
  // one all-gather at the step's end hands every rank all observers' extremes over the
  // ranks, with the loss and the stop request. One step: both runs see the same weights.
  const auto d = test::shared(test::tiny_dataset());
  const auto step = train::ObserverUpdateChoice::Step;
  std::vector<double> collectives;
  const auto ranks = train_two_ranks(d, /*qat=*/true, 8, 1, step, &collectives);
  expect_bitwise_equal(ranks[0], ranks[1]);
  const auto single = train(d, initial_model(*d, true), 16, 1, nullptr, step);
  int64_t observer_tensors = 0;
  for (size_t i = 0; i < single.size(); ++i) {
    if (!quant::is_observer_state(single[i].first)) continue;
    ++observer_tensors;
    EXPECT_TRUE(at::equal(single[i].second, ranks[0][i].second)) << single[i].first;
  }
  EXPECT_GT(observer_tensors, 0);
  // The tiny model's gradients fill one bucket; the step's end is the one other collective.
  EXPECT_EQ(collectives[0], 2.0);
  EXPECT_EQ(collectives[1], 2.0);
  // The step mode is not the immediate one: one process updating in every forward ends
  // elsewhere (the parameters a forward uses differ from the step's second observer on).
  const auto immediate = train(d, initial_model(*d, true), 16, 1, nullptr);
  bool differs = false;
  for (size_t i = 0; i < single.size(); ++i) {
    if (quant::is_observer_state(single[i].first) && !at::equal(single[i].second, immediate[i].second)) differs = true;
  }
  EXPECT_TRUE(differs);
}

TEST(DataParallel, ImmediateObserversCostOneCollectivePerObserverAndForward) {
  const auto d = test::shared(test::tiny_dataset());
  std::vector<double> collectives;
  train_two_ranks(d, /*qat=*/true, 8, 2, train::ObserverUpdateChoice::Immediate, &collectives);
  auto model = initial_model(*d, true);
  const auto observers = static_cast<double>(quant::find_observers(*model).size());
  EXPECT_GE(collectives[0], 2.0 + observers);
  // FP32: the gradient bucket and the step's end.
  train_two_ranks(d, /*qat=*/false, 8, 2, train::ObserverUpdateChoice::Immediate, &collectives);
  EXPECT_EQ(collectives[0], 2.0);
}

TEST(DataParallel, ShardedValidationGivesTheMetricsOfOneProcessBitForBit) {
  // Batches of 7 leave a partial last batch, and an odd number of them leaves rank 1
  // without a batch in the last round.
  const auto d = test::shared(test::tiny_dataset());
  const size_t windows = d->num_windows(data::Split::Validation);
  size_t batch = 7;
  while (((windows + batch - 1) / batch) % 2 == 0 || windows % batch == 0) ++batch;
  auto model = initial_model(*d, /*qat=*/true);
  const auto single = eval::evaluate_model(model, *d, data::Split::Validation, batch, kCpu);
  std::vector<model::TemporalFusionTransformer> models{initial_model(*d, true), initial_model(*d, true)};
  std::vector<eval::ForecastMetrics> sharded(2);
  const auto errors = test::run_loopback_ranks(2, [&](int64_t rank, int64_t port) {
    auto group = Collective::connect(test::loopback_rank(rank, 2, port), std::chrono::seconds(10));
    sharded[rank] = *evaluate_sharded(group, models[rank], *d, data::Split::Validation, batch, kCpu, {});
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (const auto& m : sharded) {
    EXPECT_EQ(m.count, single.count);
    EXPECT_EQ(m.loss, single.loss);
    EXPECT_EQ(m.rmse, single.rmse);
    EXPECT_EQ(m.mae, single.mae);
    EXPECT_EQ(m.p50, single.p50);
    EXPECT_EQ(m.p90, single.p90);
  }
}

TEST(DataParallel, AStopRequestedOnOneRankStopsEveryRankAfterTheSameStep) {
  // Only rank 1 is asked to stop, at its second poll (after its second step). Were the
  // ranks not to agree, rank 0 would go on to a third step and wait in its gradient
  // all-reduce for a peer that left, until the 10 s timeout failed it.
  const auto d = test::shared(test::tiny_dataset());
  std::vector<model::TemporalFusionTransformer> models{initial_model(*d, false), initial_model(*d, false)};
  std::vector<train::TrainResult> results(2);
  std::vector<int64_t> steps(2, -1), batches_done(2, -1);
  const auto errors = test::run_loopback_ranks(2, [&](int64_t rank, int64_t port) {
    auto group =
        std::make_shared<Collective>(Collective::connect(test::loopback_rank(rank, 2, port), std::chrono::seconds(10)));
    train::Trainer trainer(models[rank], d, train_options(8, 6), kCpu);
    trainer.set_data_parallel(group);
    train::ProgressReporter quiet;
    int polls = 0;
    results[rank] = trainer.fit(quiet, [&polls, rank] { return rank == 1 && ++polls == 2; });
    steps[rank] = trainer.state().global_step;
    batches_done[rank] = trainer.state().batches_done_in_epoch;
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  for (size_t rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(results[rank].interrupted) << "rank " << rank;
    EXPECT_EQ(steps[rank], 2) << "rank " << rank;
    EXPECT_EQ(batches_done[rank], 2) << "rank " << rank;
  }
}

}  // namespace
}  // namespace qtft::dist
