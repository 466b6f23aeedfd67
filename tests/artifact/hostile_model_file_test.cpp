// Model files that are valid safetensors but describe a model that cannot be (absurd sizes,
// a config that disagrees with the feature spec, missing, extra or misshapen tensors, bad
// quantiles, non-finite statistics): every command and the Forecaster refuse each one with
// a clear error naming the field, before building anything from it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/data/features/dataset.h"
#include "qtft/infer/forecaster.h"
#include "qtft/io/tensor_file.h"
#include "qtft/model/model_building.h"
#include "qtft/train/trainer.h"
#include "support/bar_files.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::artifact {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Mutation {
  std::string name;
  std::function<void(io::TensorFile&)> apply;
  std::string expected;  // in every refusal's message
};

void PrintTo(const Mutation& m, std::ostream* os) { *os << m.name; }

void edit_json(io::TensorFile& file, const std::string& key, const std::function<void(nlohmann::json&)>& edit) {
  auto json = nlohmann::json::parse(file.metadata.at(key));
  edit(json);
  file.metadata[key] = json.dump();
}

at::Tensor& tensor(io::TensorFile& file, const std::string& name) {
  for (auto& [n, t] : file.tensors) {
    if (n == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

std::vector<Mutation> mutations() {
  auto config = [](const std::string& field, nlohmann::json value) {
    return [=](io::TensorFile& f) { edit_json(f, "qtft.config", [&](nlohmann::json& j) { j[field] = value; }); };
  };
  auto features = [](std::function<void(nlohmann::json&)> edit) {
    return [=](io::TensorFile& f) { edit_json(f, "qtft.features", edit); };
  };
  return {
      {"absurd_lstm_layers", config("lstm_layers", 100000),
       "lstm_layers (--lstm-layers) must be at most 8, got 100000"},
      {"absurd_hidden_size", config("hidden_size", 100000), "hidden_size (--hidden-size) must be at most 1024"},
      {"absurd_horizon", config("horizon", 1 << 30), "horizon (--horizon) must be at most"},
      {"zero_heads", config("attention_heads", 0), "attention_heads (--attention-heads) must be at least 1"},
      {"no_known_inputs", features([](nlohmann::json& j) { j["known"] = nlohmann::json::array(); }),
       "num_known 4 but qtft.features lists 0 known inputs"},
      {"more_symbols_than_listed", config("num_symbols", 3), "num_symbols 3 but qtft.features lists 2 symbols"},
      {"duplicate_symbol", features([](nlohmann::json& j) { j["symbols"][1] = j["symbols"][0]; }), "twice"},
      {"zero_std", features([](nlohmann::json& j) { j["observed"][0]["std"] = 0.0; }), "positive std"},
      {"null_mean", features([](nlohmann::json& j) { j["observed"][0]["mean"] = nullptr; }), "feature spec"},
      {"negative_target_scale", features([](nlohmann::json& j) { j["target_scale"] = -1.0; }), "target_scale -1"},
      {"old_known_bar_gap",
       [](io::TensorFile& f) {
         // As models saved before bar_gap became observed look: a fifth known input.
         edit_json(f, "qtft.features", [](nlohmann::json& j) {
           j["known"].push_back({{"name", "bar_gap"}, {"mean", 1.0}, {"std", 1.0}});
         });
         edit_json(f, "qtft.config", [](nlohmann::json& j) { j["num_known"] = 5; });
       },
       "must be retrained"},
      {"renamed_input", features([](nlohmann::json& j) { j["observed"][0]["name"] = "rsi"; }), "observed inputs"},
      {"no_median", config("quantiles", {0.1, 0.9}), "quantiles (--quantiles) must include 0.5"},
      {"unsorted_quantiles", config("quantiles", {0.9, 0.5, 0.1}), "quantiles (--quantiles) must be sorted"},
      {"windows_disagree",
       [](io::TensorFile& f) { edit_json(f, "qtft.dataset", [](nlohmann::json& j) { j["encoder_length"] = 99; }); },
       "differ from qtft.config"},
      {"missing_tensor",
       [](io::TensorFile& f) {
         std::erase_if(f.tensors, [](const auto& t) { return t.first == "model.symbol_embedding.weight"; });
       },
       "missing: symbol_embedding.weight"},
      {"extra_tensor", [](io::TensorFile& f) { f.tensors.emplace_back("model.backdoor.weight", at::zeros({2})); },
       "unexpected: backdoor.weight"},
      {"misshapen_tensor",
       [](io::TensorFile& f) {
         tensor(f, "model.symbol_embedding.weight") = at::zeros({5, 5});
       },
       "symbol_embedding.weight: file has Float [5, 5]"},
      {"malformed_lineage",
       [](io::TensorFile& f) { f.metadata["qtft.lineage"] = R"({"source": 3, "trained_through": "all of it"})"; },
       "qtft.lineage is not valid"},
      {"non_finite_weight",
       [](io::TensorFile& f) {
         auto& t = tensor(f, "model.symbol_embedding.weight");
         t = at::full(t.sizes(), std::numeric_limits<float>::infinity());
       },
       "non-finite"},
  };
}

// One tiny model with training state (so --resume applies), the bars it was built on, and
// a short CSV of recent bars for forecast.
class HostileModelFile : public ::testing::TestWithParam<Mutation> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    auto d = test::tiny_dataset();
    auto model = model::build_model(test::tiny_model_options(d), 3);
    train::Trainer trainer(model, test::shared(d), test::tiny_train_options(), c10::Device(c10::kCPU));
    auto state = trainer.state();
    save_model_file(dir_->file("good.safetensors"),
                    {test::tiny_model_options(d), d.schema(), d.options(), named_weights(*model), state});
    dir_->write("bars.csv", test::regular_bars_csv(400, "S0"));
    dir_->write("recent.csv", test::regular_bars_csv(40, "S0"));
  }
  static void TearDownTestSuite() { delete dir_; }

  std::string mutated() const {
    auto file = io::load_tensor_file(dir_->file("good.safetensors"));
    GetParam().apply(file);
    auto path = dir_->file(GetParam().name + ".safetensors");
    io::save_tensor_file(path, file);
    return path;
  }

  static test::TempDir* dir_;
};

test::TempDir* HostileModelFile::dir_ = nullptr;

TEST_P(HostileModelFile, TheLibraryRefusesIt) {
  const auto path = mutated();
  EXPECT_THAT(test::error_message([&] { load_model(path, c10::Device(c10::kCPU)); }), HasSubstr(GetParam().expected));
  EXPECT_THAT(test::error_message([&] { infer::Forecaster::load(path); }), HasSubstr(GetParam().expected));
  EXPECT_THAT(test::error_message([&] { infer::Forecaster::load(path); }), HasSubstr(path));
}

TEST_P(HostileModelFile, EveryCommandRefusesItCleanly) {
  const auto path = mutated();
  const std::string bars = " --csv-file '" + dir_->file("bars.csv") + "'";
  for (const std::string& command :
       {"inspect '" + path + "'", "evaluate --load-model '" + path + "'" + bars,
        "train --epochs 1 --load-model '" + path + "'" + bars, "train --resume --load-model '" + path + "'" + bars,
        "forecast --load-model '" + path + "' --csv-file '" + dir_->file("recent.csv") + "'"}) {
    SCOPED_TRACE(command);
    // Refusing a file takes a second; a hang is killed (137) and a huge allocation dies, so
    // either fails the exit code check.
    auto run = test::run_qtft(*dir_, command, test::kHangGuard);
    EXPECT_EQ(run.exit_code, 1);  // not a signal, not a usage error
    EXPECT_THAT(run.err, HasSubstr(GetParam().expected));
    EXPECT_THAT(run.err, Not(HasSubstr("Exception raised from")));  // no LibTorch stack trace
    EXPECT_EQ(run.err.rfind("qtft: error: ", 0), 0u) << run.err;
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileModelFile, ::testing::ValuesIn(mutations()),
                         [](const auto& info) { return info.param.name; });

TEST(HostileTrainingState, ResumeRefusesAnOptimizerStateThatDoesNotFit) {
  test::TempDir dir;
  auto d = test::tiny_dataset();
  auto model = model::build_model(test::tiny_model_options(d), 3);
  train::Trainer trainer(model, test::shared(d), test::tiny_train_options(), c10::Device(c10::kCPU));
  auto options = test::tiny_train_options();
  auto state = trainer.state();
  state.optimizer.emplace_back("symbol_embedding.weight.exp_avg", at::zeros({1}));
  train::Trainer fresh(model::build_model(test::tiny_model_options(d), 3), test::shared(d), options,
                       c10::Device(c10::kCPU));
  EXPECT_THAT(test::error_message([&] { fresh.resume_from(state, named_weights(*model)); }),
              HasSubstr("the optimizer state does not fit the model"));
  state.optimizer.clear();
  state.cpu_rng_state = at::zeros({3}, at::kByte);
  EXPECT_THAT(test::error_message([&] { fresh.resume_from(state, named_weights(*model)); }),
              HasSubstr("resume.rng.cpu is not a random generator state"));
}

TEST(CopyWeights, AMismatchLeavesTheModelUntouched) {
  auto d = test::tiny_dataset();
  auto model = model::build_model(test::tiny_model_options(d), 3);
  auto before = clone_weights(*model);
  auto other = clone_weights(*model::build_model(test::tiny_model_options(d), 4));
  other.pop_back();  // one missing: the rest must not be copied either
  EXPECT_THROW(copy_weights_into(*model, other, "test"), Error);
  auto after = clone_weights(*model);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(before[i].second.equal(after[i].second)) << before[i].first;
}

}  // namespace
}  // namespace qtft::artifact
