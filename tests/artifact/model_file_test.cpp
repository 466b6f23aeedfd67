// Model files: everything saved comes back exactly, and a reloaded model forecasts the
// same bits.
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/data/features/batch.h"
#include "qtft/io/safetensors.h"
#include "qtft/memory/rng_state.h"
#include "qtft/model/model_building.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::artifact {
namespace {

using ::testing::HasSubstr;

TEST(ModelFile, ReloadedModelPredictsBitIdenticalOutputs) {
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  auto model = model::build_model(options, 3);
  model->eval();
  test::TempDir dir;
  auto path = dir.file("m.safetensors");
  save_model_file(path, {options, d.schema(), d.options(), named_weights(*model), std::nullopt});

  auto loaded = load_model(path, c10::Device(c10::kCPU));
  loaded.model->eval();
  std::vector<size_t> indices{0, 5, 9};
  auto batch = data::make_batch(d, data::Split::Validation, indices);
  auto a = model->forward(batch.observed, batch.known, batch.symbol);
  auto b = loaded.model->forward(batch.observed, batch.known, batch.symbol);
  EXPECT_TRUE(at::equal(a.quantiles, b.quantiles));
  EXPECT_TRUE(at::equal(a.attention, b.attention));

  EXPECT_EQ(model::to_json(loaded.file.options), model::to_json(options));
  EXPECT_EQ(loaded.file.features.target_scale, d.schema().target_scale);
  EXPECT_EQ(loaded.file.features.observed[2].std, d.schema().observed[2].std);
  EXPECT_EQ(loaded.file.features.symbols, d.schema().symbols);
  EXPECT_EQ(loaded.file.dataset.encoder_length, 12);
  EXPECT_FALSE(loaded.file.training.has_value());
}

TEST(ModelFile, KeepsBothRandomStreamsOfATrainingState) {
  // A run on a GPU draws dropout from the device's CUDA generator: --resume needs its state
  // too (16 bytes there, seed and offset; any bytes do for the file).
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  auto model = model::build_model(options, 3);
  TrainingState state;
  state.cpu_rng_state = memory::RandomStream(11).state();
  state.cuda_rng_state = at::arange(16, at::kByte);
  test::TempDir dir;
  auto path = dir.file("m.safetensors");
  save_model_file(path, {options, d.schema(), d.options(), named_weights(*model), state});
  const auto loaded = load_model_file(path);
  ASSERT_TRUE(loaded.training.has_value());
  EXPECT_TRUE(at::equal(loaded.training->cpu_rng_state, state.cpu_rng_state));
  EXPECT_TRUE(at::equal(loaded.training->cuda_rng_state, state.cuda_rng_state));
  // A CPU run's file has no CUDA stream.
  state.cuda_rng_state = at::Tensor();
  save_model_file(path, {options, d.schema(), d.options(), named_weights(*model), state});
  EXPECT_FALSE(load_model_file(path).training->cuda_rng_state.defined());
}

TEST(ModelFile, WeightsThatDoNotFitAreListed) {
  auto d = test::tiny_dataset();
  auto model = model::build_model(test::tiny_model_options(d), 3);
  auto weights = named_weights(*model);
  weights.erase(weights.begin());
  weights.emplace_back("extra.weight", weights.front().second);
  auto message = test::error_message([&] { copy_weights_into(*model, weights, "f.safetensors"); });
  EXPECT_THAT(message, HasSubstr("f.safetensors: the weights do not fit"));
  EXPECT_THAT(message, HasSubstr("missing: " + named_weights(*model).front().first));
  EXPECT_THAT(message, HasSubstr("unexpected: extra.weight"));
}

TEST(ModelFile, ConformalOffsetsComeBackAndOnesThatDoNotFitAreRefusedNamingTheField) {
  auto d = test::tiny_dataset();
  auto options = test::tiny_model_options(d);
  auto model = model::build_model(options, 3);
  test::TempDir dir;
  auto path = dir.file("m.safetensors");
  save_model_file(path, {options, d.schema(), d.options(), named_weights(*model), std::nullopt});
  const auto width = static_cast<size_t>(options.horizon()) * options.quantiles().size();
  const std::string symbol = d.schema().symbols.front();
  std::vector<double> offsets(width);
  for (size_t i = 0; i < width; ++i) offsets[i] = 0.25 * static_cast<double>(i) - 1.0;
  save_conformal(path, {"adaptive", 0.05, 0, {{symbol, offsets}}});
  const auto loaded = load_model_file(path);
  ASSERT_TRUE(loaded.conformal.has_value());
  EXPECT_EQ(loaded.conformal->method, "adaptive");
  EXPECT_EQ(loaded.conformal->rate, 0.05);
  EXPECT_EQ(loaded.conformal->for_symbol(symbol, width), offsets);
  EXPECT_EQ(loaded.conformal->for_symbol("ELSE", width), std::vector<double>(width, 0.0));
  // Everything else is as it was: the model forecasts the same bits.
  EXPECT_EQ(to_json(*loaded.conformal), to_json(ConformalCalibration{"adaptive", 0.05, 0, {{symbol, offsets}}}));
  for (size_t i = 0; i < loaded.weights.size(); ++i) {
    EXPECT_TRUE(at::equal(loaded.weights[i].second, named_weights(*model)[i].second)) << loaded.weights[i].first;
  }

  const auto refused = [&](const ConformalCalibration& c) {
    return test::error_message([&] { save_conformal(path, c); });
  };
  EXPECT_THAT(refused({"adaptive", 0.05, 0, {{symbol, std::vector<double>(width + 1)}}}),
              HasSubstr(path + ": qtft.conformal.offsets[\"" + symbol + "\"] holds " + std::to_string(width + 1) +
                        " offsets; the model's horizon"));
  EXPECT_THAT(refused({"adaptive", 0.05, 0, {{"ELSE", offsets}}}),
              HasSubstr("qtft.conformal.offsets[\"ELSE\"]: the model knows no symbol 'ELSE'"));
  EXPECT_THAT(refused({"adaptive", 2.0, 0, {{symbol, offsets}}}), HasSubstr("qtft.conformal.rate 2 is outside (0, 1]"));
  EXPECT_THAT(refused({"jackknife", 0.0, 0, {}}), HasSubstr("qtft.conformal.method 'jackknife' is neither"));
  offsets[1] = std::nan("");
  EXPECT_THAT(refused({"split", 0.0, 10, {{kAllSymbols, offsets}}}),
              HasSubstr("qtft.conformal.offsets[\"*\"] holds a value that is not finite"));
  // Nothing refused was written.
  EXPECT_EQ(load_model_file(path).conformal->method, "adaptive");
}

TEST(ModelFile, RejectsFilesThatAreNotModels) {
  test::TempDir dir;
  std::vector<float> v{1};
  io::write_safetensors(dir.file("x.safetensors"),
                        {{"w", io::DType::F32, {1}, {reinterpret_cast<const std::byte*>(v.data()), 4}}}, {});
  EXPECT_THAT(test::error_message([&] { load_model_file(dir.file("x.safetensors")); }),
              HasSubstr("not a qtft model file"));
}

}  // namespace
}  // namespace qtft::artifact
