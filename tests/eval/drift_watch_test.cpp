// qtft watch's checks: verdicts that follow the numbers, the exit code a cron job reads,
// the rollback rule against a reference, and the refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qtft/common/error.h"
#include "qtft/eval/drift_watch.h"
#include "qtft/eval/evaluate.h"
#include "qtft/model/model_building.h"
#include "qtft/train/trainer.h"
#include "support/bar_files.h"
#include "support/thrown.h"
#include "support/tiny_model.h"

namespace qtft::eval {
namespace {

using ::testing::HasSubstr;
const c10::Device kCpu(c10::kCPU);

// A tiny model trained on the tiny dataset, as a file would hold it.
artifact::LoadedModel trained_model() {
  auto dataset = test::shared(test::tiny_dataset());
  auto model = model::build_model(test::tiny_model_options(*dataset), 7);
  train::Trainer trainer(model, dataset, test::tiny_train_options(), kCpu);
  train::ProgressReporter quiet;
  trainer.fit(quiet);
  artifact::ModelFile file{model->options(), dataset->schema(), dataset->options(), trainer.best_weights(),
                           trainer.state()};
  return artifact::model_from_file(file, "tiny", kCpu);
}

TEST(DriftWatch, VerdictsAndExitCodeFollowTheNumbers) {
  auto model = trained_model();
  const auto bars = test::regular_bar_set(301, 2);
  for (double degraded_pct : {-1e9, 10.0, 1e9}) {
    SCOPED_TRACE(degraded_pct);
    DriftOptions options;
    options.degraded_pct = degraded_pct;
    const auto report = watch_drift(model, bars, options);
    EXPECT_EQ(report.recorded_val_loss, model.file.training->best_val_loss);
    ASSERT_EQ(report.series.size(), 2u);
    int expected_code = 0;
    auto expect_consistent = [&](const DriftCheck& c) {
      EXPECT_GT(c.windows, 0u);
      EXPECT_DOUBLE_EQ(c.change_pct, 100.0 * (c.model.loss - report.recorded_val_loss) / report.recorded_val_loss);
      if (c.model.loss >= c.baselines.best().loss) {
        EXPECT_EQ(c.verdict, DriftVerdict::NoBetterThanNaive) << c.name;
        expected_code = std::max(expected_code, 4);
      } else if (c.change_pct > degraded_pct) {
        EXPECT_EQ(c.verdict, DriftVerdict::Degraded) << c.name;
        expected_code = std::max(expected_code, 3);
      } else {
        EXPECT_EQ(c.verdict, DriftVerdict::Ok) << c.name;
      }
    };
    for (const auto& c : report.series) expect_consistent(c);
    expect_consistent(report.overall);
    EXPECT_EQ(report.overall.windows, report.series[0].windows + report.series[1].windows);
    EXPECT_EQ(report.exit_code(), expected_code);
    if (degraded_pct == -1e9) EXPECT_GE(report.exit_code(), 3);  // every check is degraded or naive
    EXPECT_FALSE(report.reference);
  }
}

TEST(DriftWatch, RollbackAdvisedOnlyBeyondTheMarginAgainstTheReference) {
  auto model = trained_model();
  auto reference = trained_model();  // the same bits: no difference at all
  const auto bars = test::regular_bar_set(301, 2);
  DriftOptions options;
  auto report = watch_drift(model, bars, options, &reference, "fp32.safetensors");
  ASSERT_TRUE(report.reference);
  EXPECT_EQ(report.reference->difference_pct, 0.0);
  EXPECT_FALSE(report.reference->rollback);
  EXPECT_NE(report.exit_code(), 5);
  options.rollback_pct = -0.5;  // any model not 0.5% better than the reference rolls back
  report = watch_drift(model, bars, options, &reference, "fp32.safetensors");
  EXPECT_TRUE(report.reference->rollback);
  EXPECT_EQ(report.exit_code(), 5);
  EXPECT_THAT(format_drift_report(report), HasSubstr("roll back to fp32.safetensors"));
  EXPECT_EQ(to_json(report)["reference"]["rollback"], true);

  reference.file.features.target_scale *= 2;
  EXPECT_THAT(test::message_thrown([&] { watch_drift(model, bars, options, &reference, "fp32.safetensors"); }),
              HasSubstr("fp32.safetensors: scales its targets by"));
}

// The desk's figures are those of evaluate_for_desk on the same windows: the newer half of
// the bars, under the model's features.
TEST(DriftWatch, ReportsTheDeskMetricsOfTheForecastsItScores) {
  auto model = trained_model();
  const auto bars = test::regular_bar_set(301, 2);
  DriftOptions options;
  options.cost_bps = 2.0;
  const auto report = watch_drift(model, bars, options);
  auto windows = model.file.dataset;
  windows.validation_fraction = 0.5;
  windows.test_fraction = 0;
  const auto recent = data::Dataset::build(bars, windows, model.file.features);
  const auto expected =
      evaluate_for_desk(model.model, recent, data::Split::Validation, options.batch_size, kCpu, options.cost_bps);
  EXPECT_EQ(to_json(report.overall.desk, report.overall.symbols), to_json(expected.desk, recent.schema().symbols));
  EXPECT_EQ(report.overall.desk.windows, static_cast<int64_t>(report.overall.windows));
  for (const auto& c : report.series) {
    EXPECT_EQ(c.desk.windows, static_cast<int64_t>(c.windows)) << c.name;
    EXPECT_EQ(c.desk.cost_bps, 2.0);
  }
  const auto json = to_json(report);
  EXPECT_EQ(json["overall"]["desk"]["position"]["cost_bps"], 2.0);
  EXPECT_EQ(json["series"][0]["desk"]["windows"], report.series[0].windows);
  EXPECT_THAT(format_drift_report(report), HasSubstr("as a desk reads it: interval coverage"));
}

TEST(DriftWatch, RefusesTooFewBarsAndModelsWithoutAValidationLoss) {
  auto model = trained_model();
  EXPECT_THAT(test::message_thrown([&] { watch_drift(model, test::regular_bar_set(20, 2), {}); }),
              HasSubstr("test bars: symbol 'S0': "));
  model.file.training.reset();
  EXPECT_THAT(test::message_thrown([&] { watch_drift(model, test::regular_bar_set(301, 2), {}); }),
              HasSubstr("records no validation loss"));
}

}  // namespace
}  // namespace qtft::eval
