// QAT in the whole TFT: observers count exactly, freezing freezes, files keep them, and
// every layer still learns.
#include <ATen/ops/equal.h>
#include <ATen/ops/randn_like.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <map>

#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/data/features/batch.h"
#include "qtft/eval/quantile_loss.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"
#include "qtft/train/calibration.h"
#include "qtft/train/trainer.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::train {
namespace {

const c10::Device kCpu(c10::kCPU);

model::TftOptions qat_options(const data::Dataset& d, int64_t weight_bits = 8) {
  return test::tiny_model_options(d).use_qat(true).weight_bits(weight_bits);
}

artifact::NamedTensors observer_buffers(torch::nn::Module& model) {
  artifact::NamedTensors out;
  for (const auto& [name, t] : artifact::clone_weights(model)) {
    if (quant::is_observer_state(name)) out.emplace_back(name, t);
  }
  return out;
}

TEST(QatModel, HasObserversWithReadableNames) {
  auto d = test::tiny_dataset();
  auto model = model::build_model(qat_options(d), 1);
  std::vector<std::string> names;
  for (const auto& s : quant::observer_stats(*model)) names.push_back(s.name);
  using ::testing::Contains;
  EXPECT_THAT(names, Contains("static_context_enrichment.fc1"));
  EXPECT_THAT(names, Contains("encoder_vsn.flattened_grn.fc1"));
  EXPECT_THAT(names, Contains("lstm_encoder"));
  EXPECT_THAT(names, Contains("lstm_decoder"));
  EXPECT_THAT(names, Contains("symbol_embedding"));
  EXPECT_THAT(names, Contains("temporal_attention.q_proj"));
  EXPECT_THAT(names, Contains("temporal_attention.probabilities"));
  EXPECT_THAT(names, Contains("quantile_outputs.output_layer"));
  EXPECT_THAT(names, Contains("observed_embeddings.0"));
  // An FP32 model has none.
  EXPECT_TRUE(quant::observer_stats(*model::build_model(test::tiny_model_options(d), 1)).empty());
}

TEST(QatModel, EveryObserverCountsCalibrationAndTrainingStepsExactly) {
  auto d = test::tiny_dataset();
  auto model = model::build_model(qat_options(d), 1);
  calibrate_observers(model, d, 3, 16, 42, kCpu);
  for (const auto& s : quant::observer_stats(*model)) EXPECT_EQ(s.samples, 3) << s.name;
  auto options = test::tiny_train_options();
  options.epochs = 1;
  options.max_batches_per_epoch = 4;
  Trainer trainer(model, test::shared(d), options, kCpu);
  ProgressReporter quiet;
  trainer.fit(quiet);  // 4 steps; validation runs in eval mode and must not count
  for (const auto& s : quant::observer_stats(*model)) EXPECT_EQ(s.samples, 3 + 4) << s.name;
}

TEST(QatModel, FrozenObserversStayBitwiseUnchangedThroughTraining) {
  auto d = test::tiny_dataset();
  auto model = model::build_model(qat_options(d), 1);
  calibrate_observers(model, d, 2, 16, 42, kCpu);
  quant::freeze_observers(*model);
  EXPECT_TRUE(quant::observers_frozen(*model));
  auto before = observer_buffers(*model);
  auto weights_before = artifact::clone_weights(*model);
  Trainer trainer(model, test::shared(d), test::tiny_train_options(), kCpu);
  ProgressReporter quiet;
  trainer.fit(quiet);
  auto after = observer_buffers(*model);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(at::equal(before[i].second, after[i].second)) << before[i].first;
  }
  // Training itself happened: the comparison above is not between untouched models.
  EXPECT_FALSE(at::equal(weights_before[0].second, artifact::clone_weights(*model)[0].second));
}

TEST(QatModel, LiveObserversMoveDuringTraining) {
  auto d = test::tiny_dataset();
  auto model = model::build_model(qat_options(d), 1);
  calibrate_observers(model, d, 1, 16, 42, kCpu);
  auto before = observer_buffers(*model);
  Trainer trainer(model, test::shared(d), test::tiny_train_options(), kCpu);
  ProgressReporter quiet;
  trainer.fit(quiet);
  auto after = observer_buffers(*model);
  size_t changed = 0;
  for (size_t i = 0; i < before.size(); ++i) changed += !at::equal(before[i].second, after[i].second);
  EXPECT_GT(changed, before.size() / 2);
}

TEST(QatModel, SavedAndReloadedModelKeepsObserversAndOutputsExactly) {
  auto d = test::tiny_dataset();
  auto options = qat_options(d, 4);
  auto model = model::build_model(options, 1);
  calibrate_observers(model, d, 3, 16, 42, kCpu);
  test::TempDir dir;
  auto path = dir.file("qat.safetensors");
  artifact::save_model_file(path, {options, d.schema(), d.options(), artifact::named_weights(*model), std::nullopt});
  auto loaded = artifact::load_model(path, kCpu);
  EXPECT_EQ(loaded.file.options.weight_bits(), 4);
  auto a = quant::observer_stats(*model), b = quant::observer_stats(*loaded.model);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].scale, b[i].scale);
    EXPECT_EQ(a[i].zero_point, b[i].zero_point);
    EXPECT_EQ(a[i].samples, b[i].samples);
    EXPECT_EQ(a[i].min, b[i].min);
    EXPECT_EQ(a[i].max, b[i].max);
  }
  model->eval();
  loaded.model->eval();
  std::vector<size_t> ids{0, 3, 7};
  auto batch = data::make_batch(d, data::Split::Validation, ids);
  EXPECT_TRUE(at::equal(model->forward(batch.observed, batch.known, batch.symbol).quantiles,
                        loaded.model->forward(batch.observed, batch.known, batch.symbol).quantiles));
}

TEST(QatModel, EveryParameterReceivesAGradient) {
  auto d = test::tiny_dataset();
  auto model = model::build_model(qat_options(d), 1);
  calibrate_observers(model, d, 1, 16, 42, kCpu);
  model->train();
  std::vector<size_t> ids{0, 1, 2, 3};
  auto batch = data::make_batch(d, data::Split::Train, ids);
  // Random inputs: the tiny data's regular bars make bar_gap constant (normalized to exactly 0), which
  // would leave its embedding weight without gradient in any model.
  torch::manual_seed(3);
  batch.observed = at::randn_like(batch.observed);
  batch.known = at::randn_like(batch.known);
  auto out = model->forward(batch.observed, batch.known, batch.symbol);
  eval::quantile_loss(out.quantiles, batch.target, model->options().quantiles()).backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
}

TEST(QatModel, ConvertingAnFp32ModelKeepsItsWeights) {
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  auto model = model::build_model(options, 1);
  test::TempDir dir;
  auto path = dir.file("fp32.safetensors");
  artifact::save_model_file(path, {options, d.schema(), d.options(), artifact::named_weights(*model), std::nullopt});
  auto loaded = artifact::load_model(path, kCpu);
  artifact::convert_to_qat(loaded, 8, 8, kCpu);
  EXPECT_TRUE(loaded.model->options().use_qat());
  auto fp32 = artifact::named_weights(*model);
  std::map<std::string, at::Tensor> qat;
  for (const auto& [name, t] : artifact::named_weights(*loaded.model)) qat[name] = t;
  for (const auto& [name, t] : fp32) EXPECT_TRUE(at::equal(t, qat.at(name))) << name;
  EXPECT_GT(qat.size(), fp32.size());  // plus the observers
}

TEST(QatModel, BitWidthsAreValidatedNamingTheFlag) {
  auto d = test::tiny_dataset();
  EXPECT_THAT(test::error_message([&] { qat_options(d, 3).validate(); }), ::testing::HasSubstr("--weight-bits"));
  EXPECT_THAT(test::error_message([&] { qat_options(d).activation_bits(4).validate(); }),
              ::testing::HasSubstr("--activation-bits"));
  qat_options(d, 4).validate();  // 4-bit weights are supported
}

}  // namespace
}  // namespace qtft::train
