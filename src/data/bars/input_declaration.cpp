#include "qtft/data/bars/input_declaration.h"

#include <fnmatch.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/local_time.h"

namespace qtft::data {
namespace {

bool is_glob(const std::string& pattern) { return pattern.find_first_of("*?[") != std::string::npos; }

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Who claimed a column first, for the message about a second claim.
struct Claim {
  std::string flag;
  std::string pattern;
};

constexpr EnumNames<TargetTransform, 4> kTransforms{{{TargetTransform::LogReturn, "log-return"},
                                                     {TargetTransform::None, "none"},
                                                     {TargetTransform::Log, "log"},
                                                     {TargetTransform::Log1p, "log1p"}}};
constexpr EnumNames<Normalization, 2> kNormalizations{
    {{Normalization::Pooled, "pooled"}, {Normalization::PerSeries, "per-series"}}};

}  // namespace

const char* target_transform_name(TargetTransform transform) { return enum_name(kTransforms, transform); }
const char* normalization_name(Normalization normalization) { return enum_name(kNormalizations, normalization); }
const char* target_domain_error(TargetTransform transform, double value) {
  switch (transform) {
    case TargetTransform::LogReturn:
      return value > 0 ? nullptr : "is not positive: --target-transform log-return takes the log of its ratios";
    case TargetTransform::Log: return value > 0 ? nullptr : "is not positive: --target-transform log takes its log";
    case TargetTransform::Log1p:
      return value > -1 ? nullptr : "is not above -1: --target-transform log1p takes the log of 1 + it";
    case TargetTransform::None: return nullptr;
  }
  return nullptr;
}

TargetTransform parse_target_transform(const std::string& name, const std::string& flag) {
  return parse_enum(kTransforms, name, flag);
}
Normalization parse_normalization(const std::string& name, const std::string& flag) {
  return parse_enum(kNormalizations, name, flag);
}

InputDeclaration without_columns(const InputDeclaration& declaration, const std::string& source) {
  InputDeclaration out;
  out.missing = declaration.missing;
  out.from_model = declaration.from_model;
  const auto& zone = declaration.calendar_timezone;
  if (!zone.empty() && !is_time_zone(zone)) {
    throw Error(source + ": " + (declaration.from_model ? "the model's calendar" : "--calendar-timezone") + " zone '" +
                zone + "' is not in the tz database (a name such as America/Chicago)");
  }
  out.calendar_timezone = zone;
  out.calendar = declaration.calendar;
  out.target = declaration.target;
  out.target.column.clear();  // the close; resolve_inputs names another column
  return out;
}

InputDeclaration resolve_inputs(const InputDeclaration& declaration, const std::vector<std::string>& columns,
                                const std::vector<std::string>& bar_columns, const std::vector<std::string>& not_inputs,
                                const std::string& source, std::vector<std::string>* unused) {
  InputDeclaration out = without_columns(declaration, source);
  std::map<std::string, Claim> claimed;
  auto take = [&](const std::vector<std::string>& patterns, const char* flag, std::vector<std::string>& into) {
    for (const auto& pattern : patterns) {
      std::vector<std::string> matches;
      if (!is_glob(pattern)) {
        if (!contains(columns, pattern)) {
          throw Error(source + ": " + flag + " column '" + pattern +
                      "' is not in the file (columns: " + join_names(columns) + ")");
        }
        if (contains(not_inputs, pattern)) {
          throw Error(source + ": " + flag + " column '" + pattern +
                      "' is the file's timestamp or symbol column, not an input");
        }
        matches.push_back(pattern);
      } else {
        for (const auto& c : columns) {
          if (!contains(bar_columns, c) && !contains(not_inputs, c) && fnmatch(pattern.c_str(), c.c_str(), 0) == 0)
            matches.push_back(c);
        }
        if (matches.empty()) {
          throw Error(source + ": " + flag + " pattern '" + pattern +
                      "' matches no column (columns: " + join_names(columns) + ")");
        }
      }
      for (const auto& m : matches) {
        const auto [it, fresh] = claimed.try_emplace(m, Claim{flag, pattern});
        if (!fresh) {
          throw Error(source + ": column '" + m + "' is declared twice: by " + it->second.flag + " '" +
                      it->second.pattern + "' and by " + flag + " '" + pattern + "'");
        }
        into.push_back(m);
      }
    }
  };
  const bool model = declaration.from_model;
  take(declaration.observed, model ? "the model's observed" : "--observed", out.observed);
  take(declaration.known, model ? "the model's known" : "--known", out.known);
  take(declaration.statics, model ? "the model's static" : "--static", out.statics);
  take(declaration.observed_categorical, model ? "the model's observed categorical" : "--observed-categorical",
       out.observed_categorical);
  take(declaration.known_categorical, model ? "the model's known categorical" : "--known-categorical",
       out.known_categorical);
  take(declaration.static_categorical, model ? "the model's static categorical" : "--static-categorical",
       out.static_categorical);
  if (const auto& target = declaration.target.column; !target.empty() && target != bar_columns.at(3)) {
    const char* flag = declaration.from_model ? "the model's target column" : "--target-column";
    if (!contains(columns, target)) {
      throw Error(source + ": " + flag + " '" + target + "' is not in the file (columns: " + join_names(columns) + ")");
    }
    if (contains(not_inputs, target)) {
      throw Error(source + ": " + flag + " '" + target + "' is the file's timestamp or symbol column, not a number");
    }
    out.target.column = target;
  }
  for (const auto& c : columns) {
    if (unused && !contains(bar_columns, c) && !contains(not_inputs, c) && !claimed.count(c) && c != out.target.column)
      unused->push_back(c);
  }
  return out;
}

InputDeclaration read_input_declaration(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the input declaration");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann's message holds the line and column ("... at line 3, column 5: ...").
    throw Error(path + ": not a JSON input declaration: " + e.what());
  }
  if (!json.is_object())
    throw Error(path + ": an input declaration is a JSON object of lists, e.g. {\"observed\": [...]}");
  InputDeclaration out;
  const std::map<std::string, std::vector<std::string>*> lists{{"observed", &out.observed},
                                                               {"known", &out.known},
                                                               {"static", &out.statics},
                                                               {"observed_categorical", &out.observed_categorical},
                                                               {"known_categorical", &out.known_categorical},
                                                               {"static_categorical", &out.static_categorical}};
  for (const auto& [key, value] : json.items()) {
    if (key == "calendar") {
      std::string terms;
      if (!value.is_array())
        throw Error(path + ": 'calendar' must be a list of calendar terms, e.g. [\"day-of-week\"]");
      for (const auto& item : value) {
        if (!item.is_string()) throw Error(path + ": 'calendar' holds " + item.dump() + ", not a calendar term");
        terms += (terms.empty() ? "" : ",") + item.get<std::string>();
      }
      try {
        out.calendar = parse_calendar(terms.empty() ? "none" : terms, path + ": 'calendar'");
      } catch (const UsageError& e) {
        throw Error(e.what());  // a file's error, not a flag's
      }
      continue;
    }
    const auto list = lists.find(key);
    if (list == lists.end()) {
      throw Error(path + ": unknown key '" + key +
                  "' (an input declaration has observed, known, static, observed_categorical, known_categorical, "
                  "static_categorical and calendar)");
    }
    std::vector<std::string>* into = list->second;
    if (!value.is_array()) throw Error(path + ": '" + key + "' must be a list of column names or globs");
    for (const auto& item : value) {
      if (!item.is_string()) {
        throw Error(path + ": '" + key + "' holds " + item.dump() + ", not a column name or glob");
      }
      into->push_back(item.get<std::string>());
    }
  }
  return out;
}

void append_declaration(InputDeclaration& into, const InputDeclaration& more) {
  auto append = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  append(into.observed, more.observed);
  append(into.known, more.known);
  append(into.statics, more.statics);
  append(into.observed_categorical, more.observed_categorical);
  append(into.known_categorical, more.known_categorical);
  append(into.static_categorical, more.static_categorical);
  if (more.calendar) {
    if (into.calendar && *into.calendar != *more.calendar) {
      throw UsageError("--calendar and the declaration file's 'calendar' name different terms: give one");
    }
    into.calendar = more.calendar;
  }
}

namespace {
std::vector<std::string> reals_then_categoricals(const std::vector<std::string>& reals,
                                                 const std::vector<std::string>& categoricals) {
  std::vector<std::string> out = reals;
  out.insert(out.end(), categoricals.begin(), categoricals.end());
  return out;
}
}  // namespace

std::vector<std::string> InputDeclaration::observed_columns() const {
  return reals_then_categoricals(observed, observed_categorical);
}
std::vector<std::string> InputDeclaration::known_columns() const {
  return reals_then_categoricals(known, known_categorical);
}
std::vector<std::string> InputDeclaration::static_columns() const {
  return reals_then_categoricals(statics, static_categorical);
}
bool InputDeclaration::same_columns(const InputDeclaration& o) const {
  return observed == o.observed && known == o.known && statics == o.statics &&
         observed_categorical == o.observed_categorical && known_categorical == o.known_categorical &&
         static_categorical == o.static_categorical && missing == o.missing && target == o.target;
}

}  // namespace qtft::data
