#include "qtft/artifact/model_file.h"

#include <ATen/ops/isfinite.h>
#include <ATen/ops/scalar_tensor.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "qtft/artifact/int8_file.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/io/tensor_file.h"
#include "qtft/quant/observers.h"

namespace qtft::artifact {
namespace {

constexpr const char* kFormat = "qtft-model-1";
constexpr const char* kResumePrefix = "resume.";

void append_prefixed(io::TensorFile& out, const std::string& prefix, const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) out.tensors.emplace_back(prefix + name, t);
}

NamedTensors take_prefixed(const io::TensorFile& in, const std::string& prefix) {
  NamedTensors out;
  for (const auto& [name, t] : in.tensors) {
    if (name.rfind(prefix, 0) == 0) out.emplace_back(name.substr(prefix.size()), t);
  }
  return out;
}

nlohmann::json state_json(const TrainingState& s) {
  return {{"epochs_completed", s.epochs_completed},
          {"batches_done_in_epoch", s.batches_done_in_epoch},
          {"epoch_loss_sum", s.epoch_loss_sum},
          {"epoch_samples", s.epoch_samples},
          {"global_step", s.global_step},
          {"best_val_loss", s.best_val_loss},
          {"best_epoch", s.best_epoch},
          {"epochs_without_improvement", s.epochs_without_improvement},
          {"learning_rate", s.learning_rate},
          {"plateau_wait", s.plateau_wait},
          {"finished", s.finished},
          {"history", s.history},
          {"config", s.config},
          {"run", s.run}};
}

const std::string& metadata(const io::TensorFile& file, const std::string& key, const std::string& source) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end()) {
    throw Error(source + ": not a qtft model file (no '" + key + "' metadata)");
  }
  return it->second;
}

nlohmann::json parse_metadata(const io::TensorFile& file, const std::string& key, const std::string& source) {
  auto json = nlohmann::json::parse(metadata(file, key, source), nullptr, false);
  if (json.is_discarded()) throw Error(source + ": metadata '" + key + "' is not valid JSON");
  return json;
}

// Option checks name the command-line flag ("--hidden-size must be ..."); for a file the
// fault is its field: "hidden_size (--hidden-size) must be ...".
std::string as_field_message(const std::string& message) {
  if (message.rfind("--", 0) != 0) return message;
  const auto end = message.find(' ');
  const std::string flag = message.substr(0, end);
  std::string field = flag.substr(2);
  std::replace(field.begin(), field.end(), '-', '_');
  return field + " (" + flag + ")" + (end == std::string::npos ? "" : message.substr(end));
}

}  // namespace

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SeriesMark, symbol, bar_ns, close)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BarsAdded, symbol, first_bar_ns, last_bar_ns)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Lineage, source, trained_through, parent, added)

nlohmann::json to_json(const Lineage& lineage) { return nlohmann::json(lineage); }

Lineage lineage_from_json(const nlohmann::json& json) {
  try {
    return json.get<Lineage>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("qtft.lineage is not valid: ") + e.what());
  }
}

std::vector<double> ConformalCalibration::for_symbol(const std::string& symbol, size_t width) const {
  const auto it = offsets.find(method == "split" ? std::string(kAllSymbols) : symbol);
  return it != offsets.end() ? it->second : std::vector<double>(width, 0.0);
}

const ConformalCalibration& require_conformal(const ModelFile& file, const std::string& method,
                                              const std::string& source) {
  if (method != "split" && method != "adaptive") throw UsageError("--conformal " + method + ": use split or adaptive");
  if (!file.conformal) {
    throw Error(source + ": holds no conformal offsets (qtft.conformal) to forecast with: `qtft backtest " +
                "--conformal adaptive` saves them with its models, `qtft train --conformal split` with its model");
  }
  if (file.conformal->method != method) {
    throw Error(source + ": qtft.conformal.method is " + file.conformal->method + ", not " + method);
  }
  return *file.conformal;
}

nlohmann::json to_json(const ConformalCalibration& c) {
  nlohmann::json out = {{"method", c.method}, {"offsets", c.offsets}};
  if (c.method == "adaptive") out["rate"] = c.rate, out["through_ns"] = c.through_ns;
  if (c.method == "split") out["calibration_windows"] = c.calibration_windows;
  return out;
}

ConformalCalibration conformal_from_json(const nlohmann::json& json) {
  ConformalCalibration c;
  try {
    c.method = json.at("method").get<std::string>();
    c.offsets = json.at("offsets").get<std::map<std::string, std::vector<double>>>();
    if (c.method == "adaptive") {
      c.rate = json.at("rate").get<double>();
      c.through_ns = json.value("through_ns", std::map<std::string, int64_t>{});
    }
    if (c.method == "split") c.calibration_windows = json.at("calibration_windows").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("qtft.conformal is not valid: ") + e.what());
  }
  return c;
}

std::map<std::string, std::string> model_file_metadata(const ModelFile& file, const std::string& format) {
  std::map<std::string, std::string> out{{"qtft.format", format},
                                         {"qtft.config", model::to_json(file.options).dump()},
                                         {"qtft.features", data::to_json(file.features).dump()},
                                         {"qtft.dataset", data::to_json(file.dataset).dump()}};
  if (file.lineage) out["qtft.lineage"] = to_json(*file.lineage).dump();
  if (file.conformal) out["qtft.conformal"] = to_json(*file.conformal).dump();
  return out;
}

void save_model_file(const std::filesystem::path& path, const ModelFile& file) {
  // Saving its float values as a model file would let them be trained off the int8 grid.
  if (file.int8_weights) throw Error(path.string() + ": an int8 model is saved only by qtft export-int8");
  io::TensorFile out;
  append_prefixed(out, kModelWeightPrefix, file.weights);
  out.metadata = model_file_metadata(file, kFormat);
  if (file.training) {
    const auto& s = *file.training;
    // infinity is not JSON: an unset best loss is written as null.
    auto json = state_json(s);
    if (!std::isfinite(s.best_val_loss)) json["best_val_loss"] = nullptr;
    out.metadata["qtft.training"] = json.dump();
    append_prefixed(out, std::string(kResumePrefix) + "optimizer.", s.optimizer);
    append_prefixed(out, std::string(kResumePrefix) + "model.", s.current_weights);
    if (s.cpu_rng_state.defined()) out.tensors.emplace_back(std::string(kResumePrefix) + "rng.cpu", s.cpu_rng_state);
    if (s.cuda_rng_state.defined()) {
      out.tensors.emplace_back(std::string(kResumePrefix) + "rng.cuda", s.cuda_rng_state.to(at::kCPU));
    }
  }
  io::save_tensor_file(path, out);
}

namespace {

// Offsets that fit the model's quantiles and horizon, finite, for symbols it knows.
template <typename Fail>
void check_conformal(const ConformalCalibration& c, const ModelFile& file, Fail fail) {
  const auto& o = file.options;
  if (c.method != "split" && c.method != "adaptive") {
    fail("qtft.conformal.method '" + c.method + "' is neither split nor adaptive");
  }
  if (c.method == "adaptive" && !(c.rate > 0.0 && c.rate <= 1.0)) {
    fail("qtft.conformal.rate " + format_number(c.rate) + " is outside (0, 1]");
  }
  if (c.method == "split" && (c.offsets.size() != 1 || !c.offsets.count(kAllSymbols))) {
    fail("qtft.conformal.offsets of a split calibration hold one entry, \"*\"");
  }
  const auto width = static_cast<size_t>(o.horizon()) * o.quantiles().size();
  for (const auto& [symbol, offsets] : c.offsets) {
    const std::string field = "qtft.conformal.offsets[\"" + symbol + "\"]";
    if (c.method == "adaptive" &&
        std::find(file.features.symbols.begin(), file.features.symbols.end(), symbol) == file.features.symbols.end()) {
      fail(field + ": the model knows no symbol '" + symbol + "'");
    }
    if (offsets.size() != width) {
      fail(field + " holds " + std::to_string(offsets.size()) + " offsets; the model's horizon " +
           std::to_string(o.horizon()) + " x " + std::to_string(o.quantiles().size()) + " quantiles need " +
           std::to_string(width));
    }
    if (!std::all_of(offsets.begin(), offsets.end(), [](double x) { return std::isfinite(x); })) {
      fail(field + " holds a value that is not finite");
    }
  }
}

}  // namespace

void validate_model_file(const ModelFile& file, const std::string& source) {
  auto fail = [&](const std::string& what) { throw Error(source + ": " + what); };
  try {
    file.options.validate();
  } catch (const Error& e) {
    fail("qtft.config is not a configuration qtft can build: " + as_field_message(e.what()));
  }
  const auto& o = file.options;
  const auto& spec = file.features;
  auto count = [](const auto& v) { return static_cast<int64_t>(v.size()); };
  if (count(spec.observed) != o.num_observed()) {
    fail("qtft.config says num_observed " + std::to_string(o.num_observed()) + " but qtft.features lists " +
         std::to_string(spec.observed.size()) + " observed inputs");
  }
  if (count(spec.known) != o.num_known()) {
    fail("qtft.config says num_known " + std::to_string(o.num_known()) + " but qtft.features lists " +
         std::to_string(spec.known.size()) + " known inputs");
  }
  if (count(spec.symbols) != o.num_symbols()) {
    fail("qtft.config says num_symbols " + std::to_string(o.num_symbols()) + " but qtft.features lists " +
         std::to_string(spec.symbols.size()) + " symbols");
  }
  if (count(spec.statics) != o.num_static()) {
    fail("qtft.config says num_static " + std::to_string(o.num_static()) + " but qtft.features lists " +
         std::to_string(spec.statics.size()) + " static inputs");
  }
  // Each kind's categoricals follow its reals, one embedding of its vocabulary's rows each.
  auto check_categories = [&](const std::vector<data::SchemaInput>& stats, const std::vector<int64_t>& rows,
                              const char* kind) {
    std::vector<int64_t> listed;
    for (size_t i = 0; i < stats.size(); ++i) {
      if (!stats[i].categorical) continue;
      if (i + 1 < stats.size() && !stats[i + 1].categorical)
        fail(std::string("qtft.features lists a ") + kind + " real input after the categorical '" + stats[i].name +
             "'");
      listed.push_back(stats[i].categories());
    }
    if (listed != rows)
      fail(std::string("qtft.config's ") + kind + " categoricals do not match the vocabularies of qtft.features");
  };
  check_categories(spec.observed, o.observed_categories(), "observed");
  check_categories(spec.known, o.known_categories(), "known");
  check_categories(spec.statics, o.static_categories(), "static");
  std::set<std::string> symbols;
  for (const auto& name : spec.symbols) {
    if (name.empty()) fail("qtft.features lists an empty symbol name");
    if (!symbols.insert(name).second) fail("qtft.features lists the symbol '" + name + "' twice");
  }
  auto check_stats = [&](const std::vector<data::SchemaInput>& stats, const char* kind) {
    for (const auto& f : stats) {
      if (!std::isfinite(f.mean) || !std::isfinite(f.std) || !(f.std > 0)) {
        fail(std::string("qtft.features: ") + kind + " input '" + f.name + "' has mean " + format_number(f.mean) +
             " and std " + format_number(f.std) + " (finite, with a positive std, expected)");
      }
    }
  };
  check_stats(spec.observed, "observed");
  check_stats(spec.known, "known");
  check_stats(spec.statics, "static");
  if (!std::isfinite(spec.target_scale) || !(spec.target_scale > 0)) {
    fail("qtft.features: target_scale " + format_number(spec.target_scale) + " is not a finite positive number");
  }
  if (!std::isfinite(spec.target_center))
    fail("qtft.features: target center " + format_number(spec.target_center) + " is not finite");
  for (size_t i = 0; i < spec.series_stats.size(); ++i) {
    const auto& st = spec.series_stats[i];
    auto all_fine = [](const std::vector<double>& v, bool positive) {
      return std::all_of(v.begin(), v.end(), [&](double x) { return std::isfinite(x) && (!positive || x > 0); });
    };
    if (!all_fine(st.observed_mean, false) || !all_fine(st.observed_std, true) || !all_fine(st.known_mean, false) ||
        !all_fine(st.known_std, true) || !std::isfinite(st.target_center) || !std::isfinite(st.target_scale) ||
        !(st.target_scale > 0)) {
      fail("qtft.features: the per-series statistics of symbol '" + spec.symbols.at(i) +
           "' are not finite, with positive stds");
    }
  }
  try {
    file.dataset.validate();
  } catch (const Error& e) {
    fail("qtft.dataset is not valid: " + as_field_message(e.what()));
  }
  if (file.dataset.encoder_length != o.encoder_length() || file.dataset.horizon != o.horizon()) {
    fail("qtft.dataset windows (encoder " + std::to_string(file.dataset.encoder_length) + ", horizon " +
         std::to_string(file.dataset.horizon) + ") differ from qtft.config's (encoder " +
         std::to_string(o.encoder_length()) + ", horizon " + std::to_string(o.horizon()) + ")");
  }
  if (file.conformal) check_conformal(*file.conformal, file, fail);
  for (const auto& [name, t] : file.weights) {
    // Observer state may be infinite by design (the running min/max before any data).
    if (quant::is_observer_state(name)) continue;
    if (at::isFloatingType(t.scalar_type()) && !at::isfinite(t).all().item<bool>()) {
      fail("tensor model." + name + " holds non-finite values");
    }
  }
}

void save_conformal(const std::filesystem::path& path, const ConformalCalibration& conformal) {
  // Read once, as bytes: the offsets are checked against the file's configuration and
  // symbols, and nothing else in it changes (a backtest saves them after every fold).
  const std::string source = path.string();
  auto raw = io::load_tensor_file(path);
  const std::string format = metadata(raw, "qtft.format", source);
  if (format != kFormat && format != kInt8Format) throw Error(source + ": not a qtft model file ('" + format + "')");
  const ModelFile file = [&] {
    try {
      return ModelFile{model::tft_options_from_json(parse_metadata(raw, "qtft.config", source)),
                       data::input_schema_from_json(parse_metadata(raw, "qtft.features", source)),
                       data::DatasetOptions{},
                       {},
                       std::nullopt};
    } catch (const Error& e) {
      if (std::string(e.what()).rfind(source, 0) == 0) throw;
      throw Error(source + ": " + e.what());
    }
  }();
  check_conformal(conformal, file, [&](const std::string& what) { throw Error(source + ": " + what); });
  raw.metadata["qtft.conformal"] = to_json(conformal).dump();
  io::save_tensor_file(path, raw);
}

ModelFile load_model_file(const std::filesystem::path& path) {
  const std::string source = path.string();
  auto in = io::load_tensor_file(path);
  const std::string format = metadata(in, "qtft.format", source);
  if (format != kFormat && format != kInt8Format) {
    throw Error(source + ": unsupported model format '" + format + "' (expected " + kFormat + " or " + kInt8Format +
                ")");
  }
  const bool int8 = format == kInt8Format;
  Int8Weights int8_weights;
  if (int8) int8_weights = dequantize_int8_tensors(in, source);
  const int64_t int8_bits = int8_weights.weight_bits;
  auto parsed = [&](const char* key, auto parse) {
    try {
      return parse(parse_metadata(in, key, source));
    } catch (const Error& e) {
      if (std::string(e.what()).rfind(source, 0) == 0) throw;
      throw Error(source + ": " + key + ": " + e.what());
    }
  };
  ModelFile file{
      parsed("qtft.config", model::tft_options_from_json), parsed("qtft.features", data::input_schema_from_json),
      parsed("qtft.dataset", data::dataset_options_from_json), take_prefixed(in, kModelWeightPrefix), std::nullopt};
  if (int8) {
    if (!file.options.use_qat() || file.options.weight_bits() != int8_bits) {
      throw Error(source + ": qtft.config (use_qat " + std::string(file.options.use_qat() ? "true" : "false") +
                  ", weight_bits " + std::to_string(file.options.weight_bits()) + ") does not describe its " +
                  std::to_string(int8_bits) + "-bit int8 weights");
    }
    if (in.metadata.count("qtft.training")) throw Error(source + ": an int8 export cannot hold a training state");
    file.int8_weights = true;
    file.quantized_weights = std::move(int8_weights.weights);
  }
  if (in.metadata.count("qtft.lineage")) file.lineage = parsed("qtft.lineage", lineage_from_json);
  if (in.metadata.count("qtft.conformal")) file.conformal = parsed("qtft.conformal", conformal_from_json);
  if (in.metadata.count("qtft.training")) {
    auto json = parse_metadata(in, "qtft.training", source);
    TrainingState s;
    try {
      s.epochs_completed = json.at("epochs_completed").get<int64_t>();
      s.batches_done_in_epoch = json.at("batches_done_in_epoch").get<int64_t>();
      s.epoch_loss_sum = json.at("epoch_loss_sum").get<double>();
      s.epoch_samples = json.at("epoch_samples").get<int64_t>();
      s.global_step = json.at("global_step").get<int64_t>();
      s.best_val_loss = json.at("best_val_loss").is_null() ? std::numeric_limits<double>::infinity()
                                                           : json.at("best_val_loss").get<double>();
      s.best_epoch = json.at("best_epoch").get<int64_t>();
      s.epochs_without_improvement = json.at("epochs_without_improvement").get<int64_t>();
      s.learning_rate = json.at("learning_rate").get<double>();
      s.plateau_wait = json.at("plateau_wait").get<int64_t>();
      s.finished = json.at("finished").get<bool>();
      s.history = json.at("history");
      s.config = json.at("config");
      if (json.contains("run")) s.run = json.at("run");
    } catch (const nlohmann::json::exception& e) {
      throw Error(source + ": malformed training state: " + e.what());
    }
    s.optimizer = take_prefixed(in, std::string(kResumePrefix) + "optimizer.");
    s.current_weights = take_prefixed(in, std::string(kResumePrefix) + "model.");
    for (const auto& [name, t] : in.tensors) {
      if (name == std::string(kResumePrefix) + "rng.cpu") s.cpu_rng_state = t;
      if (name == std::string(kResumePrefix) + "rng.cuda") s.cuda_rng_state = t;
    }
    file.training = std::move(s);
  }
  validate_model_file(file, source);
  return file;
}

NamedTensors named_weights(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& p : module.named_parameters()) out.emplace_back(p.key(), p.value().detach());
  for (const auto& b : module.named_buffers()) out.emplace_back(b.key(), b.value().detach());
  return out;
}

NamedTensors clone_weights(const torch::nn::Module& module) {
  auto out = named_weights(module);
  for (auto& [name, t] : out) t = t.to(at::kCPU).clone();
  return out;
}

void copy_weights_into(torch::nn::Module& module, const NamedTensors& weights, const std::string& source,
                       bool observers_may_be_missing) {
  // Every name, shape and dtype is checked before anything is copied, so a mismatch
  // leaves the module as it was rather than half overwritten.
  std::map<std::string, at::Tensor> given(weights.begin(), weights.end());
  std::string problems;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // target, source
  auto targets = named_weights(module);
  for (auto& [name, target] : targets) {
    auto it = given.find(name);
    if (it == given.end()) {
      if (observers_may_be_missing && quant::is_observer_state(name)) continue;
      problems += "\n  missing: " + name;
      continue;
    }
    const auto& t = it->second;
    if (t.sizes() != target.sizes() || t.scalar_type() != target.scalar_type()) {
      problems += "\n  " + name + ": file has " + std::string(c10::toString(t.scalar_type())) + " " +
                  c10::str(t.sizes()) + ", model has " + std::string(c10::toString(target.scalar_type())) + " " +
                  c10::str(target.sizes());
    } else {
      copies.emplace_back(target, t);
    }
    given.erase(it);
  }
  for (const auto& [name, _] : given) problems += "\n  unexpected: " + name;
  if (!problems.empty()) {
    throw Error(source + ": the weights do not fit the model built from its configuration:" + problems);
  }
  for (auto& [target, t] : copies) target.copy_(t);
}

}  // namespace qtft::artifact
