#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qtft/data/features/dataset.h"
#include "qtft/model/tft_options.h"
#include "qtft/quant/int8_linear.h"

namespace torch::nn {
class Module;
}

namespace qtft::artifact {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// What --resume needs to continue a run exactly where it stopped: the loop counters, the
// optimizer's moments, the weights at the end of the last epoch (the file's main weights
// are the best epoch's) and the random generators that drive dropout (CPU, and CUDA when
// the run trained on a GPU).
struct TrainingState {
  int64_t epochs_completed = 0;
  // An interrupted epoch resumes at its next batch, in the same shuffled order.
  int64_t batches_done_in_epoch = 0;
  double epoch_loss_sum = 0.0;  // sum of batch loss x batch size so far in the epoch
  int64_t epoch_samples = 0;
  int64_t global_step = 0;
  double best_val_loss = std::numeric_limits<double>::infinity();
  int64_t best_epoch = 0;  // 1-based; 0 when no epoch finished
  int64_t epochs_without_improvement = 0;
  double learning_rate = 0.0;
  int64_t plateau_wait = 0;
  bool finished = false;                             // stopped early or ran all epochs (not interrupted)
  nlohmann::json history = nlohmann::json::array();  // one object per epoch
  nlohmann::json config;                             // the training options, for the record
  // The program's own record of the run, kept as given (qtft keeps the save path and the
  // data source, so that `qtft train --resume --load-model F` alone continues the run).
  nlohmann::json run = nlohmann::json::object();
  NamedTensors optimizer;        // "<param>.exp_avg", "<param>.exp_avg_sq", "<param>.step"
  NamedTensors current_weights;  // module parameter and buffer names
  at::Tensor cpu_rng_state;      // uint8, as at::Generator::get_state gives it
  at::Tensor cuda_rng_state;     // the training device's CUDA generator; undefined on the CPU
};

// The last bar of one series that a model trained on (the end of its training split).
struct SeriesMark {
  std::string symbol;
  int64_t bar_ns = 0;
  double close = 0.0;  // so that bars read again can be checked against those trained on
};

// Bars an update (qtft train --update) trained on that its parent had not seen.
struct BarsAdded {
  std::string symbol;
  int64_t first_bar_ns = 0;
  int64_t last_bar_ns = 0;
};

// Which bars a model has learned from, so that `qtft train --update` continues after them
// and a deployed file says where it came from. JSON qtft.lineage; files saved before it
// existed have none.
struct Lineage {
  std::string source;                       // the bars of its last training run
  std::vector<SeriesMark> trained_through;  // per symbol the model knows and has trained on
  std::string parent;                       // "<file> fnv1a64:<hex>" an update started from; "" for a first run
  std::vector<BarsAdded> added;             // an update's new training bars
};
nlohmann::json to_json(const Lineage& lineage);
Lineage lineage_from_json(const nlohmann::json& json);  // throws qtft::Error naming the field

// Conformal offsets a model carries (eval/conformal.h fits and moves them): added to its
// quantiles per horizon step and level, in the model's scaled units, [horizon, levels]
// row-major. JSON qtft.conformal.
struct ConformalCalibration {
  std::string method;                                  // "split": one set for every symbol; "adaptive": one per symbol
  double rate = 0.0;                                   // adaptive: the rate each outcome moves an offset by
  int64_t calibration_windows = 0;                     // split: the validation windows fitted on
  std::map<std::string, std::vector<double>> offsets;  // by symbol; split: the one entry "*"
  // adaptive: per symbol, the last bar whose outcome moved its offsets (a later walk, or
  // `watch`, goes on after it)
  std::map<std::string, int64_t> through_ns;
  // The offsets `symbol` is forecast with; zeros for a symbol an adaptive walk never saw.
  std::vector<double> for_symbol(const std::string& symbol, size_t width) const;
};
inline constexpr const char* kAllSymbols = "*";
nlohmann::json to_json(const ConformalCalibration& calibration);
ConformalCalibration conformal_from_json(const nlohmann::json& json);  // throws qtft::Error naming the field

// A model file: safetensors with the weights under "model.", the training state under
// "resume.", and JSON metadata (qtft.config, qtft.features, qtft.dataset, qtft.training).
struct ModelFile {
  model::TftOptions options;
  data::InputSchema features;
  data::DatasetOptions dataset;
  NamedTensors weights;  // module parameter and buffer names
  std::optional<TrainingState> training;
  // Read from an int8 export (artifact/int8_file.h): the weights QAT quantizes per channel
  // hold their integers times their scales, and a model built from it uses them as they
  // are. Such a file serves forecasts; it cannot be trained further.
  bool int8_weights = false;
  // The integers and scales behind those weights, by weight name, for integer products
  // (TemporalFusionTransformer::use_integer_products).
  std::map<std::string, quant::QuantizedWeight> quantized_weights{};
  std::optional<Lineage> lineage{};
  std::optional<ConformalCalibration> conformal{};
};

void save_model_file(const std::filesystem::path& path, const ModelFile& file);
// The offsets of `file` (read from `source`) to forecast with under `method` (split or
// adaptive): throws UsageError for another method name, qtft::Error naming the file when it
// holds none or the other method's.
const ConformalCalibration& require_conformal(const ModelFile& file, const std::string& method,
                                              const std::string& source);
// Sets the conformal offsets of the model file (or int8 export) at `path`, rewriting it
// atomically with everything else as it was; throws qtft::Error naming the file and field
// when they do not fit its model.
void save_conformal(const std::filesystem::path& path, const ConformalCalibration& conformal);

// Where a file's weights live: "model.<module path>".
inline constexpr const char* kModelWeightPrefix = "model.";
// The metadata every qtft model file carries, int8 exports included: qtft.format as given,
// and the configuration, features and dataset options as JSON (qtft.config, qtft.features,
// qtft.dataset).
std::map<std::string, std::string> model_file_metadata(const ModelFile& file, const std::string& format);
// Reads and validates (validate_model_file) a model file; throws qtft::Error naming the
// file and the field at fault.
ModelFile load_model_file(const std::filesystem::path& path);
// What a file must satisfy before a model is built from it: a configuration within
// TftOptions' bounds, a feature spec that agrees with it (input and symbol counts, unique
// symbols, finite statistics with positive spreads, a positive target scale), windows that
// match the configuration, and finite weights. Names and shapes of the weights are checked
// against the built model by copy_weights_into.
void validate_model_file(const ModelFile& file, const std::string& source);

// Parameters then buffers, by their module path, detached (they alias the module's storage).
NamedTensors named_weights(const torch::nn::Module& module);
// Copies `weights` into the module's parameters and buffers; every name must match in name,
// shape and dtype, in both directions, or the error lists what differs and nothing is copied.
// With `observers_may_be_missing`, the module's QAT observer buffers may be absent from
// `weights` (an FP32 model converted for QAT or PTQ): they keep their fresh state.
void copy_weights_into(torch::nn::Module& module, const NamedTensors& weights, const std::string& source,
                       bool observers_may_be_missing = false);
// Deep copies (clones) of the module's weights on the CPU.
NamedTensors clone_weights(const torch::nn::Module& module);

}  // namespace qtft::artifact
