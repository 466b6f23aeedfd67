#include "qtft/data/features/detail/input_schema_json.h"

#include <nlohmann/json.hpp>

#include "qtft/common/error.h"

namespace qtft::data {
namespace {

// A derived input is written as before declared columns existed, so that a spec of derived
// inputs alone (every model saved before) reads and writes the same text.
nlohmann::json stats_json(const std::vector<SchemaInput>& stats) {
  auto out = nlohmann::json::array();
  for (const auto& s : stats) {
    nlohmann::json entry{{"name", s.name}, {"mean", s.mean}, {"std", s.std}};
    if (s.source == InputSource::Column) entry["source"] = "column";
    if (s.categorical) entry["levels"] = s.levels;  // a categorical's vocabulary
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<SchemaInput> stats_from(const nlohmann::json& json) {
  std::vector<SchemaInput> out;
  for (const auto& s : json) {
    const auto source = s.value("source", std::string("derived"));
    if (source != "derived" && source != "column") {
      throw Error("model file: malformed feature spec: input source '" + source + "' (expected derived or column)");
    }
    SchemaInput stats{s.at("name").get<std::string>(),
                      s.at("mean").get<double>(),
                      s.at("std").get<double>(),
                      source == "column" ? InputSource::Column : InputSource::Derived,
                      false,
                      {}};
    if (s.contains("levels")) {
      stats.categorical = true;
      stats.levels = s.at("levels").get<std::vector<std::string>>();
    }
    out.push_back(std::move(stats));
  }
  return out;
}

template <class F>
auto parse_or_throw(const char* what, F&& f) {
  try {
    return f();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("model file: malformed ") + what + ": " + e.what());
  }
}

}  // namespace

// Doubles go through nlohmann's shortest round-trip printing, so statistics reload bit-exact.
nlohmann::json to_json(const InputSchema& spec) {
  nlohmann::json out{{"observed", stats_json(spec.observed)},
                     {"known", stats_json(spec.known)},
                     {"symbols", spec.symbols},
                     {"target_scale", spec.target_scale}};
  if (!spec.statics.empty()) out["statics"] = stats_json(spec.statics);
  if (spec.missing() == MissingValues::ForwardFill) out["missing"] = "forward-fill";
  if (!spec.calendar_timezone().empty()) out["calendar_timezone"] = spec.calendar_timezone();
  // Only another target than today's is written, so older models' specs keep their text.
  if (const auto& target = spec.target(); !target.is_default()) {
    out["target"] = {{"column", target.column},
                     {"transform", target_transform_name(target.transform)},
                     {"normalize", normalization_name(target.normalize)},
                     {"center", spec.target_center}};
  }
  if (!spec.series_stats.empty()) {
    auto series = nlohmann::json::array();
    for (const auto& st : spec.series_stats) {
      series.push_back({{"observed_mean", st.observed_mean},
                        {"observed_std", st.observed_std},
                        {"known_mean", st.known_mean},
                        {"known_std", st.known_std},
                        {"target_center", st.target_center},
                        {"target_scale", st.target_scale}});
    }
    out["series_stats"] = std::move(series);
  }
  return out;
}

InputSchema input_schema_from_json(const nlohmann::json& json) {
  return parse_or_throw("feature spec", [&] {
    InputSchema spec;
    spec.observed = stats_from(json.at("observed"));
    spec.known = stats_from(json.at("known"));
    spec.symbols = json.at("symbols").get<std::vector<std::string>>();
    if (json.contains("statics")) spec.statics = stats_from(json.at("statics"));
    spec.target_scale = json.at("target_scale").get<double>();
    const auto missing = json.value("missing", std::string("error"));
    if (missing != "error" && missing != "forward-fill")
      throw Error("model file: malformed feature spec: missing '" + missing + "' (expected error or forward-fill)");
    InputDeclaration& declared = spec.declared;
    declared.missing = missing == "forward-fill" ? MissingValues::ForwardFill : MissingValues::Error;
    declared.calendar_timezone = json.value("calendar_timezone", std::string());
    if (json.contains("target")) {
      const auto& t = json.at("target");
      declared.target.column = t.at("column").get<std::string>();
      try {
        declared.target.transform = parse_target_transform(t.at("transform").get<std::string>(), "target transform");
        declared.target.normalize = parse_normalization(t.at("normalize").get<std::string>(), "target normalize");
      } catch (const UsageError& e) {
        throw Error(std::string("model file: malformed feature spec: ") + e.what());
      }
      spec.target_center = t.at("center").get<double>();
    }
    if (json.contains("series_stats")) {
      for (const auto& st : json.at("series_stats")) {
        InputSchema::SeriesStats stats{st.at("observed_mean").get<std::vector<double>>(),
                                       st.at("observed_std").get<std::vector<double>>(),
                                       st.at("known_mean").get<std::vector<double>>(),
                                       st.at("known_std").get<std::vector<double>>(),
                                       st.at("target_center").get<double>(),
                                       st.at("target_scale").get<double>()};
        if (stats.observed_mean.size() != spec.observed.size() || stats.observed_std.size() != spec.observed.size() ||
            stats.known_mean.size() != spec.known.size() || stats.known_std.size() != spec.known.size()) {
          throw Error("model file: malformed feature spec: a series' statistics do not match its inputs");
        }
        spec.series_stats.push_back(std::move(stats));
      }
      if (spec.series_stats.size() != spec.symbols.size())
        throw Error("model file: malformed feature spec: per-series statistics for " +
                    std::to_string(spec.series_stats.size()) + " of " + std::to_string(spec.symbols.size()) +
                    " symbols");
    }
    // The file holds names: each input's producer is read back from its name, once, here.
    resolve_producers(spec, "the model");
    return spec;
  });
}

nlohmann::json to_json(const DatasetOptions& o) {
  return {{"encoder_length", o.encoder_length},
          {"horizon", o.horizon},
          {"validation_fraction", o.validation_fraction},
          {"test_fraction", o.test_fraction}};
}

DatasetOptions dataset_options_from_json(const nlohmann::json& json) {
  return parse_or_throw("dataset options", [&] {
    DatasetOptions o;
    o.encoder_length = json.at("encoder_length").get<int64_t>();
    o.horizon = json.at("horizon").get<int64_t>();
    o.validation_fraction = json.at("validation_fraction").get<double>();
    o.test_fraction = json.at("test_fraction").get<double>();
    return o;
  });
}

}  // namespace qtft::data
