// Which inputs a dataset computes and from which columns: a new model's plan from the bars'
// fields, spacing and declaration, or a saved spec's, checked against the bars it reads.
#include <algorithm>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/detail/features.h"

namespace qtft::data {
namespace {

std::vector<std::string> names_of(const std::vector<FeatureStats>& stats) {
  std::vector<std::string> names;
  for (const auto& s : stats) names.push_back(s.name);
  return names;
}

std::string describe_target(const TargetDeclaration& t) {
  return std::string(target_transform_name(t.transform)) + " of " +
         (t.column.empty() ? "the close" : "'" + t.column + "'") + ", " + normalization_name(t.normalize);
}

std::string zone_name(const std::string& zone) { return zone.empty() ? "UTC (no --calendar-timezone)" : zone; }

void check_spec_matches(BarFields fields, const DeclaredColumns& declared, const std::string& source,
                        const FeatureSpec& spec) {
  const DerivedInputs derived = derived_inputs_of(spec, source + ": the model");
  const BarFields needed = derived.fields_read();
  // A file may carry more columns than the model uses (volume, say); it may not carry fewer.
  if (needed.has(BarField::OpenHighLow) && !fields.has(BarField::OpenHighLow)) {
    throw Error(source +
                ": the model was trained on open/high/low bars (inputs hl_range, close_open) but this "
                "file has only close prices");
  }
  if (needed.has(BarField::Volume) && !fields.has(BarField::Volume)) {
    throw Error(source + ": the model was trained on bars with volume (input log_volume) but this file has none");
  }
  if (declared.calendar_timezone != spec.calendar_timezone) {
    throw Error(source + ": the model's calendar is in " + zone_name(spec.calendar_timezone) +
                " but the bars were read for " + zone_name(declared.calendar_timezone));
  }
  // The terms, whatever their order: the model's order is the one its rows hold.
  auto sorted = [](std::vector<CalendarTerm> terms) {
    std::sort(terms.begin(), terms.end());
    return terms;
  };
  if (declared.calendar && sorted(*declared.calendar) != sorted(calendar_of(derived))) {
    throw Error(source + ": the model's calendar is " + calendar_list(calendar_of(derived), ",") +
                " but the bars were read for the calendar " + calendar_list(*declared.calendar, ",") +
                " (--calendar, or an --inputs file's \"calendar\")");
  }
  if (declared.target != spec.target) {
    throw Error(source + ": the model forecasts " + describe_target(spec.target) + " but the bars were read for " +
                describe_target(declared.target));
  }
  const InputDeclaration model = declaration_of(spec);
  if (declared.observed != model.observed || declared.known != model.known || declared.statics != model.statics ||
      declared.observed_categorical != model.observed_categorical ||
      declared.known_categorical != model.known_categorical ||
      declared.static_categorical != model.static_categorical || declared.missing != spec.missing) {
    auto kinds = [](const auto& d) {
      std::string out = "observed [" + join_names(d.observed) + "], known [" + join_names(d.known) + "]";
      if (!d.statics.empty()) out += ", static [" + join_names(d.statics) + "]";
      for (const auto& [name, list] : {std::pair{"observed categorical", &d.observed_categorical},
                                       std::pair{"known categorical", &d.known_categorical},
                                       std::pair{"static categorical", &d.static_categorical}}) {
        if (!list->empty()) out += std::string(", ") + name + " [" + join_names(*list) + "]";
      }
      return out;
    };
    throw Error(source + ": the model reads the declared columns " + kinds(model) + " but the bars were read with " +
                kinds(declared));
  }
}

std::vector<std::string> categorical_names(const std::vector<FeatureStats>& stats) {
  std::vector<std::string> names;
  for (const auto& s : stats) {
    if (s.categorical) names.push_back(s.name);
  }
  return names;
}

std::vector<std::string> real_column_names(const std::vector<FeatureStats>& stats) {
  std::vector<std::string> names;
  for (const auto& s : stats) {
    if (s.source == InputSource::Column && !s.categorical) names.push_back(s.name);
  }
  return names;
}

}  // namespace

FeaturePlan plan_features(BarFields fields, const BarSpacing& spacing, const DeclaredColumns& declared,
                          const FeatureSpec* saved, const std::string& source) {
  FeaturePlan plan;
  plan.declared = declared;
  if (!saved) {
    const auto calendar = declared.calendar ? *declared.calendar : spacing.calendar();
    plan.derived = derived_inputs_for(fields, !declared.target.is_close_log_return(), calendar);
    if (plan.derived.known.empty() && declared.known_columns().empty()) {
      throw UsageError(source +
                       ": --calendar none leaves the decoder no input: keep a calendar term or declare a "
                       "known column (--known, --known-categorical)");
    }
    return plan;
  }
  check_spec_matches(fields, declared, source, *saved);
  plan.spec = *saved;
  plan.saved = true;
  plan.derived = derived_inputs_of(*saved, source + ": the model");
  return plan;
}

SeriesFeatures dataset_series(const BarSeries& s, size_t position, size_t series_count, const FeaturePlan& plan,
                              const DatasetOptions& options, const std::string& source) {
  RawFeatures raw;
  SeriesFeatures f;
  dataset_series(s, position, series_count, plan, options, source, raw, f);
  return f;
}

void dataset_series(const BarSeries& s, size_t position, size_t series_count, const FeaturePlan& plan,
                    const DatasetOptions& options, const std::string& source, RawFeatures& raw, SeriesFeatures& f) {
  const int64_t id =
      plan.saved ? resolve_symbol_id(plan.spec, s.symbol, series_count == 1, source) : static_cast<int64_t>(position);
  featurize_series(s, plan.spec, id, raw, f);
  if (plan.saved) f.symbol = plan.spec.symbols[static_cast<size_t>(id)];
  f.split_bounds = split_bounds(static_cast<int64_t>(f.rows()), options);
}

InputDeclaration declaration_of(const FeatureSpec& spec) {
  InputDeclaration out;
  out.observed = real_column_names(spec.observed);
  out.known = real_column_names(spec.known);
  out.statics = real_column_names(spec.statics);
  out.observed_categorical = categorical_names(spec.observed);
  out.known_categorical = categorical_names(spec.known);
  out.static_categorical = categorical_names(spec.statics);
  out.missing = spec.missing;
  out.calendar_timezone = spec.calendar_timezone;
  out.target = spec.target;
  out.from_model = true;
  return out;
}

std::vector<std::string> input_names(const std::vector<FeatureStats>& stats, InputSource source) {
  std::vector<std::string> names;
  for (const auto& s : stats) {
    if (s.source == source) names.push_back(s.name);
  }
  return names;
}

std::vector<DerivedInput> calendar_inputs_of(const FeatureSpec& spec, const std::string& where) {
  std::vector<DerivedInput> out;
  for (const auto& name : input_names(spec.known, InputSource::Derived)) {
    const auto input = derived_input_named(name);
    if (!input || !is_calendar_input(*input)) {
      throw Error(where + "'s known inputs [" + join_names(names_of(spec.known)) + "] hold '" + name +
                  "', which is not a calendar input this qtft computes; models saved before bar_gap became an "
                  "observed input must be retrained");
    }
    out.push_back(*input);
  }
  return out;
}

DerivedInputs derived_inputs_of(const FeatureSpec& spec, const std::string& where) {
  // The derived inputs lead each kind, the declared columns follow (compute_raw_features).
  auto derived_lead = [](const std::vector<FeatureStats>& stats) {
    return std::is_partitioned(stats.begin(), stats.end(),
                               [](const FeatureStats& s) { return s.source == InputSource::Derived; });
  };
  if (!derived_lead(spec.observed) || !derived_lead(spec.known)) {
    throw Error(where + "'s inputs list a declared column before a derived input");
  }
  DerivedInputs out;
  out.known = calendar_inputs_of(spec, where);
  for (const auto& name : input_names(spec.observed, InputSource::Derived)) {
    const auto input = derived_input_named(name);
    if (!input || is_calendar_input(*input)) {
      throw Error(where + "'s observed inputs [" + join_names(names_of(spec.observed)) + "] hold '" + name +
                  "', which is not an observed input this qtft computes from bars");
    }
    out.observed.push_back(*input);
  }
  // The target's past is an input exactly when the target is not the close's log return.
  const bool past_target = !spec.target.is_close_log_return();
  const bool has_past = std::count(out.observed.begin(), out.observed.end(), DerivedInput::PastTarget) == 1;
  const bool log_return_first = !out.observed.empty() && out.observed.front() == DerivedInput::LogReturn;
  if (has_past != past_target || !log_return_first) {
    throw Error(where + "'s observed inputs [" + join_names(names_of(spec.observed)) +
                "] are not the ones this qtft computes for its target (" +
                (past_target ? "log_return first, and its past as 'target'" : "log_return first, no 'target'") + ")");
  }
  return out;
}

void check_feature_names(const FeatureSpec& spec, const std::string& where) { (void)derived_inputs_of(spec, where); }

int64_t resolve_symbol_id(const FeatureSpec& spec, const std::string& symbol, bool sole_series,
                          const std::string& source) {
  if (sole_series && spec.symbols.size() == 1) return 0;
  auto it = std::find(spec.symbols.begin(), spec.symbols.end(), symbol);
  if (it == spec.symbols.end()) {
    throw Error(source + ": symbol '" + symbol + "' was not in the training data (known: " + join_names(spec.symbols) +
                ")");
  }
  return it - spec.symbols.begin();
}

}  // namespace qtft::data
