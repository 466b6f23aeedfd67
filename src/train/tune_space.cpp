// The tune file: which options a search ranges over and how, each trial's draw from it, and
// the trial's options applied to a training setup.
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/train/tune.h"

namespace qtft::train {
namespace {

enum class Kind { Integer, Real, Boolean };

struct Tunable {
  const char* name;
  Kind kind;
};

// What a tune file may range over, with the type of its values.
constexpr Tunable kTunables[] = {
    {"hidden_size", Kind::Integer},
    {"variable_hidden_size", Kind::Integer},
    {"attention_heads", Kind::Integer},
    {"lstm_layers", Kind::Integer},
    {"dropout", Kind::Real},
    {"learning_rate", Kind::Real},
    {"weight_decay", Kind::Real},
    {"batch_size", Kind::Integer},
    {"encoder_length", Kind::Integer},
    {"use_qat", Kind::Boolean},
};

const Tunable* find_tunable(const std::string& name) {
  for (const auto& t : kTunables) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

std::string listed_tunables() {
  std::string out;
  for (const auto& t : kTunables) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

bool fits(const nlohmann::json& value, Kind kind) {
  switch (kind) {
    case Kind::Integer: return value.is_number_integer();
    case Kind::Real: return value.is_number();
    case Kind::Boolean: return value.is_boolean();
  }
  return false;
}

const char* kind_name(Kind kind) {
  return kind == Kind::Integer ? "an integer" : kind == Kind::Real ? "a number" : "true or false";
}

// One option's range as the file gives it: [choices...] or {"min", "max", "log"}.
TuneRange parse_range(const std::string& name, Kind kind, const nlohmann::json& given, const std::string& source) {
  const auto fail = [&](const std::string& what) { throw UsageError(source + ": " + name + ": " + what); };
  TuneRange range;
  if (given.is_array()) {
    if (given.empty()) fail("the list of choices is empty");
    for (const auto& choice : given) {
      if (!fits(choice, kind)) fail("choice " + choice.dump() + " is not " + kind_name(kind));
      range.choices.push_back(choice);
    }
    return range;
  }
  if (!given.is_object()) fail(given.dump() + " is neither a list of choices nor {\"min\": .., \"max\": ..}");
  if (kind == Kind::Boolean) fail("a range of true or false is a list: [false, true]");
  for (const auto& [key, value] : given.items()) {
    if (key != "min" && key != "max" && key != "log") fail("unknown key '" + key + "' (min, max, log)");
  }
  if (!given.contains("min") || !given.contains("max")) fail("a range needs both min and max");
  for (const char* end : {"min", "max"}) {
    if (!fits(given.at(end), kind)) fail(std::string(end) + " " + given.at(end).dump() + " is not " + kind_name(kind));
  }
  range.min = given.at("min").get<double>();
  range.max = given.at("max").get<double>();
  if (given.contains("log")) {
    if (!given.at("log").is_boolean()) fail("log " + given.at("log").dump() + " is not true or false");
    range.log = given.at("log").get<bool>();
  }
  if (!(range.min <= range.max)) {
    fail("the range [" + format_number(range.min) + ", " + format_number(range.max) + "] is empty");
  }
  if (range.log && !(range.min > 0)) fail("a log range needs min > 0, got " + format_number(range.min));
  return range;
}

}  // namespace

const std::vector<std::string>& tunable_options() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& t : kTunables) out.push_back(t.name);
    return out;
  }();
  return names;
}

TuneSpace parse_tune_space(const std::string& text, const std::string& source) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message says where: "parse error at line 3, column 14: ...".
    std::string what = e.what();
    const auto at = what.find("parse error");
    throw UsageError(source + ": not valid JSON: " + (at == std::string::npos ? what : what.substr(at)));
  }
  if (!document.is_object() || document.empty()) {
    throw UsageError(source +
                     ": a tune file is a JSON object of options to ranges, such as {\"hidden_size\": [16, "
                     "32], \"dropout\": {\"min\": 0.0, \"max\": 0.3}}");
  }
  TuneSpace space;
  for (const auto& [name, given] : document.items()) {
    const Tunable* tunable = find_tunable(name);
    if (!tunable) throw UsageError(source + ": '" + name + "' cannot be tuned (tunable: " + listed_tunables() + ")");
    space.ranges[name] = parse_range(name, tunable->kind, given, source);
  }
  return space;
}

TuneSpace read_tune_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(path.string() + ": cannot read the tune file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_tune_space(text.str(), path.string());
}

nlohmann::json draw_trial(const TuneSpace& space, uint64_t seed, int64_t index) {
  // A stream of its own per trial: trial k draws the same options whatever ran before it.
  std::seed_seq sequence{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(index),
                         0x7475u /* "tu" */};
  std::mt19937_64 random(sequence);
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [name, range] : space.ranges) {  // in name order: the map's
    if (!range.choices.empty()) {
      std::uniform_int_distribution<size_t> pick(0, range.choices.size() - 1);
      options[name] = range.choices[pick(random)];
      continue;
    }
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(random);
    double value = range.log ? std::exp(std::log(range.min) + u * (std::log(range.max) - std::log(range.min)))
                             : range.min + u * (range.max - range.min);
    if (find_tunable(name)->kind == Kind::Integer) {
      options[name] = static_cast<int64_t>(std::llround(value));
    } else {
      options[name] = value;
    }
  }
  return options;
}

TrainingSetup apply_trial(const TrainingSetup& base, const nlohmann::json& options) {
  TrainingSetup setup = base;
  for (const auto& [name, value] : options.items()) {
    if (name == "hidden_size") setup.architecture.hidden_size = value.get<int64_t>();
    if (name == "variable_hidden_size") setup.architecture.variable_hidden_size = value.get<int64_t>();
    if (name == "attention_heads") setup.architecture.attention_heads = value.get<int64_t>();
    if (name == "lstm_layers") setup.architecture.lstm_layers = value.get<int64_t>();
    if (name == "dropout") setup.architecture.dropout = value.get<double>();
    if (name == "learning_rate") setup.train.learning_rate = value.get<double>();
    if (name == "weight_decay") setup.train.weight_decay = value.get<double>();
    if (name == "batch_size") {
      if (value.get<int64_t>() < 1) throw UsageError("batch_size " + value.dump() + ": must be at least 1");
      setup.train.batch_size = value.get<size_t>();
    }
    if (name == "encoder_length") setup.dataset.encoder_length = value.get<int64_t>();
    if (name == "use_qat") setup.qat.use_qat = value.get<bool>();
  }
  try {
    check_training_setup(setup);
  } catch (const UsageError& e) {
    throw UsageError("trial options " + options.dump() + ": " + e.what());
  }
  return setup;
}

std::vector<Rung> halving_rungs(int64_t trials, int64_t eta) {
  if (trials < 1) throw UsageError("--trials must be at least 1");
  if (eta < 2) throw UsageError("--eta must be at least 2");
  // The rungs: trials, trials / eta, ... down to the last with at least one; rung r of R
  // trains eta^(r - R) of the full budget.
  std::vector<int64_t> sizes{trials};
  while (sizes.back() / eta >= 1) sizes.push_back(sizes.back() / eta);
  std::vector<Rung> rungs;
  const auto last = static_cast<double>(sizes.size() - 1);
  for (size_t r = 0; r < sizes.size(); ++r) {
    rungs.push_back({sizes[r], std::pow(static_cast<double>(eta), static_cast<double>(r) - last)});
  }
  return rungs;
}

TuneMethod parse_tune_method(const std::string& name) {
  if (name == "halving") return TuneMethod::Halving;
  if (name == "random") return TuneMethod::Random;
  throw UsageError("--method " + name + ": use halving or random");
}

TuneObjective parse_tune_objective(const std::string& name) {
  if (name == "loss") return TuneObjective::Loss;
  if (name == "ic") return TuneObjective::Ic;
  if (name == "coverage") return TuneObjective::Coverage;
  throw UsageError("--objective " + name + ": use loss, ic or coverage");
}

const char* tune_objective_name(TuneObjective objective) {
  return objective == TuneObjective::Loss ? "loss" : objective == TuneObjective::Ic ? "ic" : "coverage";
}

}  // namespace qtft::train
