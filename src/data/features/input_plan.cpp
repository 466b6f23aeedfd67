// A schema's producers: a new model's planned from the bars' fields, spacing and declaration,
// a saved model's read back from its inputs' names and checked against the bars it reads.
#include <algorithm>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/detail/features.h"

namespace qtft::data {
namespace {

std::vector<std::string> names_of(const std::vector<SchemaInput>& stats) {
  std::vector<std::string> names;
  for (const auto& s : stats) names.push_back(s.name);
  return names;
}

std::string describe_target(const TargetDeclaration& t) {
  return std::string(target_transform_name(t.transform)) + " of " +
         (t.column.empty() ? "the close" : "'" + t.column + "'") + ", " + normalization_name(t.normalize);
}

std::string zone_name(const std::string& zone) { return zone.empty() ? "UTC (no --calendar-timezone)" : zone; }

std::vector<std::string> categorical_names(const std::vector<SchemaInput>& stats) {
  std::vector<std::string> names;
  for (const auto& s : stats) {
    if (s.categorical) names.push_back(s.name);
  }
  return names;
}

std::vector<std::string> real_column_names(const std::vector<SchemaInput>& stats) {
  std::vector<std::string> names;
  for (const auto& s : stats) {
    if (s.source == InputSource::Column && !s.categorical) names.push_back(s.name);
  }
  return names;
}

}  // namespace

void check_bars_fit(BarFields fields, const InputDeclaration& declared, const InputSchema& saved,
                    const std::string& source) {
  const DerivedInputs& derived = saved.derived;
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
  if (declared.calendar_timezone != saved.calendar_timezone()) {
    throw Error(source + ": the model's calendar is in " + zone_name(saved.calendar_timezone()) +
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
  if (declared.target != saved.target()) {
    throw Error(source + ": the model forecasts " + describe_target(saved.target()) + " but the bars were read for " +
                describe_target(declared.target));
  }
  if (!declared.same_columns(saved.declared)) {
    auto kinds = [](const InputDeclaration& d) {
      std::string out = "observed [" + join_names(d.observed) + "], known [" + join_names(d.known) + "]";
      if (!d.statics.empty()) out += ", static [" + join_names(d.statics) + "]";
      for (const auto& [name, list] : {std::pair{"observed categorical", &d.observed_categorical},
                                       std::pair{"known categorical", &d.known_categorical},
                                       std::pair{"static categorical", &d.static_categorical}}) {
        if (!list->empty()) out += std::string(", ") + name + " [" + join_names(*list) + "]";
      }
      return out;
    };
    throw Error(source + ": the model reads the declared columns " + kinds(saved.declared) +
                " but the bars were read with " + kinds(declared));
  }
}

InputSchema plan_inputs(BarFields fields, const BarSpacing& spacing, const InputDeclaration& declared,
                        const std::string& source) {
  InputSchema schema;
  const auto calendar = declared.calendar ? *declared.calendar : spacing.calendar();
  schema.derived = derived_inputs_for(fields, !declared.target.is_close_log_return(), calendar);
  if (schema.derived.known.empty() && declared.known_columns().empty()) {
    throw UsageError(source +
                     ": --calendar none leaves the decoder no input: keep a calendar term or declare a "
                     "known column (--known, --known-categorical)");
  }
  schema.declared = declared;
  schema.declared.calendar.reset();  // the terms are schema.derived.known from here on
  return schema;
}

SeriesFeatures dataset_series(const BarSeries& s, size_t position, size_t series_count, const InputSchema& schema,
                              const DatasetOptions& options, const std::string& source) {
  RawFeatures raw;
  SeriesFeatures f;
  dataset_series(s, position, series_count, schema, options, source, raw, f);
  return f;
}

void dataset_series(const BarSeries& s, size_t position, size_t series_count, const InputSchema& schema,
                    const DatasetOptions& options, const std::string& source, RawFeatures& raw, SeriesFeatures& f) {
  // The series a schema was fitted on sit at their own positions of its vocabulary; other
  // bars (a saved model's) are looked up by name.
  const bool in_place = position < schema.symbols.size() && schema.symbols[position] == s.symbol;
  const int64_t id =
      in_place ? static_cast<int64_t>(position) : resolve_symbol_id(schema, s.symbol, series_count == 1, source);
  featurize_series(s, schema, id, raw, f);
  f.symbol = schema.symbols[static_cast<size_t>(id)];
  f.split_bounds = split_bounds(static_cast<int64_t>(f.rows()), options);
}

std::vector<std::string> input_names(const std::vector<SchemaInput>& stats, InputSource source) {
  std::vector<std::string> names;
  for (const auto& s : stats) {
    if (s.source == source) names.push_back(s.name);
  }
  return names;
}

namespace {

std::vector<DerivedInput> calendar_inputs_named(const InputSchema& spec, const std::string& where) {
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

DerivedInputs derived_inputs_named(const InputSchema& spec, const std::string& where) {
  // The derived inputs lead each kind, the declared columns follow (compute_raw_features).
  auto derived_lead = [](const std::vector<SchemaInput>& stats) {
    return std::is_partitioned(stats.begin(), stats.end(),
                               [](const SchemaInput& s) { return s.source == InputSource::Derived; });
  };
  if (!derived_lead(spec.observed) || !derived_lead(spec.known)) {
    throw Error(where + "'s inputs list a declared column before a derived input");
  }
  DerivedInputs out;
  out.known = calendar_inputs_named(spec, where);
  for (const auto& name : input_names(spec.observed, InputSource::Derived)) {
    const auto input = derived_input_named(name);
    if (!input || is_calendar_input(*input)) {
      throw Error(where + "'s observed inputs [" + join_names(names_of(spec.observed)) + "] hold '" + name +
                  "', which is not an observed input this qtft computes from bars");
    }
    out.observed.push_back(*input);
  }
  // The target's past is an input exactly when the target is not the close's log return.
  const bool past_target = !spec.target().is_close_log_return();
  const bool has_past = std::count(out.observed.begin(), out.observed.end(), DerivedInput::PastTarget) == 1;
  const bool log_return_first = !out.observed.empty() && out.observed.front() == DerivedInput::LogReturn;
  if (has_past != past_target || !log_return_first) {
    throw Error(where + "'s observed inputs [" + join_names(names_of(spec.observed)) +
                "] are not the ones this qtft computes for its target (" +
                (past_target ? "log_return first, and its past as 'target'" : "log_return first, no 'target'") + ")");
  }
  return out;
}

}  // namespace

void resolve_producers(InputSchema& schema, const std::string& where) {
  schema.derived = derived_inputs_named(schema, where);
  InputDeclaration& d = schema.declared;
  d.observed = real_column_names(schema.observed);
  d.known = real_column_names(schema.known);
  d.statics = real_column_names(schema.statics);
  d.observed_categorical = categorical_names(schema.observed);
  d.known_categorical = categorical_names(schema.known);
  d.static_categorical = categorical_names(schema.statics);
  d.calendar.reset();
  d.from_model = true;
}

int64_t resolve_symbol_id(const InputSchema& spec, const std::string& symbol, bool sole_series,
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
