#include "qtft/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/detail/features.h"
#include "qtft/data/local_time.h"

namespace qtft::data {
namespace {

// Running mean and variance (Welford): stable over millions of rows.
struct Moments {
  double n = 0, mean = 0, m2 = 0;
  void add(double x) {
    n += 1;
    double d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  // A constant input would divide by zero; leaving it unscaled keeps it harmless.
  double std_or_one() const {
    double s = n > 1 ? std::sqrt(m2 / n) : 0.0;
    return s > 0 && std::isfinite(s) ? s : 1.0;
  }
};

int64_t windows_in(int64_t rows, const DatasetOptions& o) {
  return std::max<int64_t>(0, rows - (o.encoder_length + o.horizon) + 1);
}

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

std::string calendar_names(const std::vector<CalendarTerm>& terms) {
  std::string out;
  for (CalendarTerm term : terms) out += (out.empty() ? "" : ",") + std::string(calendar_term_name(term));
  return out.empty() ? "none" : out;
}

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
  if (declared.calendar && *declared.calendar != calendar_of(derived)) {
    throw Error(source + ": the model's calendar is " + calendar_names(calendar_of(derived)) +
                " but the bars were read for --calendar " + calendar_names(*declared.calendar));
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

size_t derived_count(const std::vector<FeatureStats>& stats) {
  return static_cast<size_t>(std::count_if(stats.begin(), stats.end(),
                                           [](const FeatureStats& f) { return f.source == InputSource::Derived; }));
}

// The level names of a series' declared column `c` of a kind (BarSeries::observed_levels...).
const std::vector<std::string>& series_levels(const std::vector<std::vector<std::string>>& levels, size_t c,
                                              const std::string& symbol, const std::string& column) {
  if (c >= levels.size() || levels[c].empty()) {
    throw Error("symbol '" + symbol + "': categorical input '" + column +
                "' has no level names (BarSeries::observed_levels, known_levels or static_levels)");
  }
  return levels[c];
}

// How a series' categorical cells become features under `stats`: per input, its level
// index + 1 in the spec's vocabulary by the series' own index, 0 for a level the
// vocabulary lacks; empty for a real input.
using CategoryMaps = std::vector<std::vector<double>>;
CategoryMaps category_maps(const std::vector<FeatureStats>& stats, const std::vector<std::vector<std::string>>& levels,
                           const std::string& symbol) {
  CategoryMaps maps(stats.size());
  const size_t derived = derived_count(stats);
  for (size_t j = 0; j < stats.size(); ++j) {
    if (!stats[j].categorical) continue;
    const auto& vocabulary = stats[j].levels;
    for (const auto& name : series_levels(levels, j - derived, symbol, stats[j].name)) {
      const auto it = std::lower_bound(vocabulary.begin(), vocabulary.end(), name);
      maps[j].push_back(it != vocabulary.end() && *it == name ? static_cast<double>(it - vocabulary.begin()) + 1 : 0);
    }
  }
  return maps;
}

// (input, the series' level index) of the cells whose level a vocabulary lacks.
using UnknownCodes = std::set<std::pair<size_t, size_t>>;

// Rows of `raw` (width stats.size()) normalized by `stats`, categorical cells through
// `maps`; marks in `unknown_rows` (one flag a row) the rows holding a level the vocabulary
// lacks, and adds those cells' input and level to `unknown_codes` when given.
void normalize_into(const std::vector<double>& raw, const std::vector<FeatureStats>& stats, const CategoryMaps& maps,
                    std::vector<float>& out, std::vector<uint8_t>& unknown_rows,
                    UnknownCodes* unknown_codes = nullptr) {
  out.resize(raw.size());
  const size_t width = stats.size();
  for (size_t i = 0; i < raw.size(); ++i) {
    const size_t j = i % width;
    const auto& s = stats[j];
    if (j < maps.size() && !maps[j].empty()) {
      const double feature = maps[j].at(static_cast<size_t>(raw[i]));
      if (feature == 0) {
        unknown_rows.at(i / width) = 1;
        if (unknown_codes != nullptr) unknown_codes->emplace(j, static_cast<size_t>(raw[i]));
      }
      out[i] = static_cast<float>(feature);
    } else {
      out[i] = static_cast<float>((raw[i] - s.mean) / s.std);
    }
  }
}

// The levels behind `codes` by name, in input order, appended to `out`.
void name_unknown_levels(const UnknownCodes& codes, const std::vector<FeatureStats>& stats,
                         const std::vector<std::vector<std::string>>& levels, const std::string& symbol,
                         std::vector<UnknownLevel>& out) {
  const size_t derived = derived_count(stats);
  for (const auto& [j, code] : codes) {
    out.push_back({stats[j].name, series_levels(levels, j - derived, symbol, stats[j].name).at(code)});
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

struct SpecFitter::Moments : data::Moments {};

// Each categorical's levels seen in the training split, by its place in a row of features
// (or among the statics), and the static reals' moments over the series with training rows.
struct SpecFitter::Vocabularies {
  std::vector<std::set<std::string>> observed, known, statics;  // parallel to the rows' inputs
  std::vector<data::Moments> static_reals;
};

SpecFitter::SpecFitter(const DerivedInputs& derived, const DeclaredColumns& declared, const DatasetOptions& options)
    : derived_(derived),
      declared_(declared),
      options_(options),
      observed_count_(derived.observed.size() + declared.observed_columns().size()),
      known_count_(derived.known.size() + declared.known_columns().size()) {
  moments_ = std::make_unique<Moments[]>(observed_count_ + known_count_ + 1);
  raw_ = std::make_unique<RawFeatures>();
  vocabularies_ = std::make_unique<Vocabularies>();
  vocabularies_->observed.resize(observed_count_);
  vocabularies_->known.resize(known_count_);
  vocabularies_->statics.resize(declared.static_columns().size());
  vocabularies_->static_reals.resize(declared.statics.size());
}

SpecFitter::~SpecFitter() = default;
SpecFitter::SpecFitter(SpecFitter&&) noexcept = default;

void SpecFitter::add(const BarSeries& s) { add_part(s, 0, s.size() > 0 ? static_cast<int64_t>(s.size()) - 1 : 0); }

void SpecFitter::add_part(const BarSeries& s, size_t first_row, int64_t series_rows) {
  const bool series_start = first_row == 0;
  if (series_start) symbols_.push_back(s.symbol);
  // Features are recomputed when the dataset is assembled rather than kept: this holds one
  // part's doubles at a time, which matters for files of millions of bars.
  RawFeatures& raw = *raw_;
  compute_raw_features(s, derived_, declared_.calendar_timezone, declared_.target, raw);
  if (raw.observed_width != observed_count_ || raw.known_width != known_count_ ||
      raw.statics.size() != vocabularies_->statics.size()) {
    throw Error("symbol '" + s.symbol + "': carries " + std::to_string(s.declared_observed.size()) + " observed, " +
                std::to_string(s.declared_known.size()) + " known and " + std::to_string(s.declared_static.size()) +
                " static declared columns, the other series " + std::to_string(declared_.observed_columns().size()) +
                ", " + std::to_string(declared_.known_columns().size()) + " and " +
                std::to_string(declared_.static_columns().size()));
  }
  const auto rows = static_cast<int64_t>(raw.target.size());
  const int64_t series_train_end = split_bounds(series_rows, options_)[1];
  // The part's rows that train: those before the series' training end.
  const int64_t train_end = std::clamp<int64_t>(series_train_end - static_cast<int64_t>(first_row), 0, rows);
  // The categoricals' vocabularies: the levels of the training rows. A kind's row holds its
  // derived inputs, its declared reals, then its categoricals.
  auto collect = [&](size_t width, size_t derived, size_t reals, const std::vector<std::string>& categoricals,
                     const std::vector<double>& values, int64_t value_rows,
                     const std::vector<std::vector<std::string>>& levels, std::vector<std::set<std::string>>& into) {
    for (size_t k = 0; k < categoricals.size(); ++k) {
      const size_t c = reals + k, place = derived + c;
      const auto& names = series_levels(levels, c, s.symbol, categoricals[k]);
      std::vector<uint8_t> seen(names.size());
      for (int64_t r = 0; r < value_rows; ++r) seen.at(static_cast<size_t>(values[r * width + place])) = 1;
      for (size_t l = 0; l < names.size(); ++l) {
        if (seen[l]) into[place].insert(names[l]);
      }
    }
  };
  auto& v = *vocabularies_;
  collect(observed_count_, observed_count_ - s.declared_observed.size(), declared_.observed.size(),
          declared_.observed_categorical, raw.observed, train_end, s.observed_levels, v.observed);
  collect(known_count_, known_count_ - s.declared_known.size(), declared_.known.size(), declared_.known_categorical,
          raw.known, train_end, s.known_levels, v.known);
  // Statics count once per series that trains.
  if (series_start && series_train_end > 0) {
    for (size_t k = 0; k < v.static_reals.size(); ++k) v.static_reals[k].add(raw.statics[k]);
    collect(raw.statics.size(), 0, declared_.statics.size(), declared_.static_categorical, raw.statics, 1,
            s.static_levels, v.statics);
  }
  auto add_rows = [&](Moments* observed) {
    Moments* known = observed + observed_count_;
    Moments& target = known[known_count_];
    for (int64_t r = 0; r < train_end; ++r) {
      for (size_t j = 0; j < observed_count_; ++j) observed[j].add(raw.observed[r * observed_count_ + j]);
      for (size_t j = 0; j < known_count_; ++j) known[j].add(raw.known[r * known_count_ + j]);
      target.add(raw.target[r]);
    }
  };
  add_rows(moments_.get());
  if (declared_.target.normalize == Normalization::PerSeries) {
    if (series_start) series_moments_.push_back(std::make_unique<Moments[]>(observed_count_ + known_count_ + 1));
    add_rows(series_moments_.back().get());
  }
}

FeatureSpec SpecFitter::finish() const {
  FeatureSpec spec;
  spec.symbols = symbols_;
  spec.missing = declared_.missing;
  spec.calendar_timezone = declared_.calendar_timezone;
  // Derived inputs first, then the declared columns, as compute_raw_features lays out a row.
  auto names_and_sources = [](std::vector<std::string> derived, const std::vector<std::string>& columns) {
    std::vector<std::pair<std::string, InputSource>> out;
    for (auto& name : derived) out.emplace_back(std::move(name), InputSource::Derived);
    for (const auto& name : columns) out.emplace_back(name, InputSource::Column);
    return out;
  };
  const auto observed_names = names_and_sources(names_of(derived_.observed), declared_.observed_columns());
  const auto known_names = names_and_sources(names_of(derived_.known), declared_.known_columns());
  const Moments* observed = moments_.get();
  const Moments* known = observed + observed_count_;
  const auto& v = *vocabularies_;
  // A categorical is left unscaled: its feature is its vocabulary index.
  auto input = [](const std::pair<std::string, InputSource>& name, const Moments& m,
                  const std::set<std::string>& levels, bool categorical) {
    FeatureStats f{name.first, m.mean, m.std_or_one(), name.second, false, {}};
    if (categorical) {
      f = {name.first, 0.0, 1.0, name.second, true, std::vector<std::string>(levels.begin(), levels.end())};
      if (f.levels.empty()) throw Error("categorical input '" + name.first + "' has no value in the training split");
    }
    return f;
  };
  const size_t first_observed_categorical = observed_count_ - declared_.observed_categorical.size();
  const size_t first_known_categorical = known_count_ - declared_.known_categorical.size();
  for (size_t j = 0; j < observed_count_; ++j)
    spec.observed.push_back(input(observed_names[j], observed[j], v.observed[j], j >= first_observed_categorical));
  for (size_t j = 0; j < known_count_; ++j)
    spec.known.push_back(input(known_names[j], known[j], v.known[j], j >= first_known_categorical));
  const auto static_names = names_and_sources({}, declared_.static_columns());
  for (size_t k = 0; k < static_names.size(); ++k) {
    const bool categorical = k >= declared_.statics.size();
    spec.statics.push_back(
        input(static_names[k], categorical ? Moments{} : Moments{v.static_reals[k]}, v.statics[k], categorical));
  }
  spec.target = declared_.target;
  // A log return is scaled, not centered (today's models, bitwise); any other target is both.
  const bool centered = declared_.target.transform != TargetTransform::LogReturn;
  spec.target_center = centered ? known[known_count_].mean : 0.0;
  spec.target_scale = known[known_count_].std_or_one();
  for (const auto& own : series_moments_) {
    const Moments* o = own.get();
    const Moments* k = o + observed_count_;
    FeatureSpec::SeriesStats stats;
    if (k[known_count_].n < 2) {
      // Too short to have statistics of its own: the pooled ones.
      for (const auto& f : spec.observed) stats.observed_mean.push_back(f.mean), stats.observed_std.push_back(f.std);
      for (const auto& f : spec.known) stats.known_mean.push_back(f.mean), stats.known_std.push_back(f.std);
      stats.target_center = spec.target_center;
      stats.target_scale = spec.target_scale;
    } else {
      for (size_t j = 0; j < observed_count_; ++j) {
        const bool categorical = spec.observed[j].categorical;
        stats.observed_mean.push_back(categorical ? 0.0 : o[j].mean);
        stats.observed_std.push_back(categorical ? 1.0 : o[j].std_or_one());
      }
      for (size_t j = 0; j < known_count_; ++j) {
        const bool categorical = spec.known[j].categorical;
        stats.known_mean.push_back(categorical ? 0.0 : k[j].mean);
        stats.known_std.push_back(categorical ? 1.0 : k[j].std_or_one());
      }
      stats.target_center = centered ? k[known_count_].mean : 0.0;
      stats.target_scale = k[known_count_].std_or_one();
    }
    spec.series_stats.push_back(std::move(stats));
  }
  return spec;
}

namespace {

const FeatureSpec::SeriesStats& series_stats_of(const FeatureSpec& spec, int64_t symbol_id) {
  if (symbol_id < 0 || static_cast<size_t>(symbol_id) >= spec.series_stats.size()) {
    throw Error("feature spec: no per-series statistics for symbol id " + std::to_string(symbol_id) + " of " +
                std::to_string(spec.series_stats.size()));
  }
  return spec.series_stats[static_cast<size_t>(symbol_id)];
}

}  // namespace

TargetScaling target_scaling_of(const FeatureSpec& spec, int64_t symbol_id) {
  if (spec.series_stats.empty()) return {spec.target_center, spec.target_scale};
  const auto& own = series_stats_of(spec, symbol_id);
  return {own.target_center, own.target_scale};
}

SeriesNormalization normalization_of(const FeatureSpec& spec, int64_t symbol_id) {
  SeriesNormalization out{spec.observed, spec.known, spec.target_center, spec.target_scale};
  if (spec.series_stats.empty()) return out;
  const auto& own = series_stats_of(spec, symbol_id);
  for (size_t j = 0; j < out.observed.size(); ++j) {
    out.observed[j].mean = own.observed_mean[j];
    out.observed[j].std = own.observed_std[j];
  }
  for (size_t j = 0; j < out.known.size(); ++j) {
    out.known[j].mean = own.known_mean[j];
    out.known[j].std = own.known_std[j];
  }
  out.target_center = own.target_center;
  out.target_scale = own.target_scale;
  return out;
}

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

SeriesView view_of(const SeriesFeatures& f) {
  return {f.symbol, f.symbol_id, f.timestamp_ns, f.close,        f.observed,
          f.known,  f.target,    f.split_bounds, f.first_bar_ns, f.statics};
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

namespace {

// The spec's derived known inputs: the calendar's, by name.
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

}  // namespace

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

SeriesFeatures featurize_series(const BarSeries& s, const FeatureSpec& spec, int64_t symbol_id) {
  RawFeatures raw;
  SeriesFeatures f;
  featurize_series(s, spec, symbol_id, raw, f);
  return f;
}

void featurize_series(const BarSeries& s, const FeatureSpec& spec, int64_t symbol_id, RawFeatures& raw,
                      SeriesFeatures& f) {
  compute_raw_features(s, derived_inputs_of(spec, "symbol '" + s.symbol + "': the feature spec"),
                       spec.calendar_timezone, spec.target, raw);
  if (raw.observed_width != spec.observed.size() || raw.known_width != spec.known.size() ||
      raw.statics.size() != spec.statics.size()) {
    throw Error("symbol '" + s.symbol + "': its bars give " + std::to_string(raw.observed_width) + " observed, " +
                std::to_string(raw.known_width) + " known and " + std::to_string(raw.statics.size()) +
                " static inputs, the feature spec has " + std::to_string(spec.observed.size()) + ", " +
                std::to_string(spec.known.size()) + " and " + std::to_string(spec.statics.size()));
  }
  f.symbol = s.symbol;
  f.symbol_id = symbol_id;
  f.first_bar_ns = s.size() > 0 ? s.timestamp_ns.front() : 0;
  f.timestamp_ns.assign(s.timestamp_ns.begin() + (s.size() > 0 ? 1 : 0), s.timestamp_ns.end());
  const auto& level = spec.target.column.empty() ? s.close : s.target_values;
  f.close.assign(level.begin() + (s.size() > 0 ? 1 : 0), level.end());
  const bool per_series = !spec.series_stats.empty();
  const SeriesNormalization own = per_series ? normalization_of(spec, symbol_id) : SeriesNormalization{};
  const auto& observed = per_series ? own.observed : spec.observed;
  const auto& known = per_series ? own.known : spec.known;
  // A row counts once as unknown, though an observed and a known level may both be new.
  const size_t rows = raw.target.size();
  std::vector<uint8_t> unknown(rows, 0), unknown_static(1, 0);
  UnknownCodes observed_codes, known_codes, static_codes;
  normalize_into(raw.observed, observed, category_maps(observed, s.observed_levels, s.symbol), f.observed, unknown,
                 &observed_codes);
  normalize_into(raw.known, known, category_maps(known, s.known_levels, s.symbol), f.known, unknown, &known_codes);
  normalize_into(raw.statics, spec.statics, category_maps(spec.statics, s.static_levels, s.symbol), f.statics,
                 unknown_static, &static_codes);
  f.unknown_levels.clear();
  name_unknown_levels(static_codes, spec.statics, s.static_levels, s.symbol, f.unknown_levels);
  name_unknown_levels(observed_codes, observed, s.observed_levels, s.symbol, f.unknown_levels);
  name_unknown_levels(known_codes, known, s.known_levels, s.symbol, f.unknown_levels);
  f.unknown_category_rows =
      unknown_static[0] ? static_cast<int64_t>(rows) : std::count(unknown.begin(), unknown.end(), uint8_t{1});
  const double center = per_series ? own.target_center : spec.target_center;
  const double scale = per_series ? own.target_scale : spec.target_scale;
  f.target.resize(raw.target.size());
  for (size_t i = 0; i < raw.target.size(); ++i) f.target[i] = static_cast<float>((raw.target[i] - center) / scale);
  const auto all = static_cast<int64_t>(rows);
  f.split_bounds = {0, all, all, all};
}

std::vector<float> known_inputs_at(std::span<const int64_t> timestamps_ns,
                                   std::span<const std::vector<double>> declared_known, const FeatureSpec& spec,
                                   int64_t symbol_id, std::span<const std::vector<std::string>> known_levels,
                                   std::vector<UnknownLevel>* unknown_levels) {
  const auto declared = input_names(spec.known, InputSource::Column);
  for (size_t c = 0; c < declared.size(); ++c) {
    if (c >= declared_known.size() || declared_known[c].size() < timestamps_ns.size()) {
      const size_t given = c < declared_known.size() ? declared_known[c].size() : 0;
      throw Error("the model reads the declared known column '" + declared[c] + "', whose values at future bars are " +
                  "data, not a function of their timestamps: " + std::to_string(timestamps_ns.size()) +
                  " future values needed, " + std::to_string(given) + " given");
    }
  }
  std::vector<int64_t> wall_clock;
  local_wall_clock(timestamps_ns, spec.calendar_timezone, wall_clock);
  const auto calendar = calendar_inputs_of(spec, "the feature spec");
  std::vector<double> raw;
  raw.reserve(timestamps_ns.size() * spec.known.size());
  // The layout of compute_raw_features: the calendar terms, then the declared columns.
  for (size_t i = 0; i < wall_clock.size(); ++i) {
    append_calendar_features(wall_clock[i], calendar, raw);
    for (size_t c = 0; c < declared.size(); ++c) raw.push_back(declared_known[c][i]);
  }
  std::vector<float> out;
  const std::vector<std::vector<std::string>> levels(known_levels.begin(), known_levels.end());
  const std::string symbol =
      symbol_id >= 0 && static_cast<size_t>(symbol_id) < spec.symbols.size() ? spec.symbols[symbol_id] : "";
  const auto maps = category_maps(spec.known, levels, symbol);
  for (size_t j = 0; j < maps.size(); ++j) {
    for (size_t i = 0; !maps[j].empty() && i < timestamps_ns.size(); ++i) {
      const double code = raw[i * spec.known.size() + j];
      if (!(code >= 0 && code < static_cast<double>(maps[j].size())))
        throw Error("future row " + std::to_string(i + 1) + ": known categorical '" + spec.known[j].name +
                    "' holds level index " + format_number(code) + " of " + std::to_string(maps[j].size()));
    }
  }
  std::vector<uint8_t> unknown(timestamps_ns.size(), 0);  // a future level unseen in training: its entry
  UnknownCodes codes;
  if (spec.series_stats.empty()) {
    normalize_into(raw, spec.known, maps, out, unknown, &codes);
  } else {
    normalize_into(raw, normalization_of(spec, symbol_id).known, maps, out, unknown, &codes);
  }
  if (unknown_levels != nullptr) name_unknown_levels(codes, spec.known, levels, symbol, *unknown_levels);
  return out;
}

std::vector<float> known_inputs_at(std::span<const int64_t> timestamps_ns, const FeatureSpec& spec) {
  return known_inputs_at(timestamps_ns, {}, spec, 0);
}

std::array<int64_t, 4> split_bounds(int64_t rows, const DatasetOptions& o) {
  auto train_end =
      static_cast<int64_t>(std::floor(static_cast<double>(rows) * (1.0 - o.validation_fraction - o.test_fraction)));
  auto val_end = static_cast<int64_t>(std::floor(static_cast<double>(rows) * (1.0 - o.test_fraction)));
  return {0, train_end, val_end, rows};
}

const char* split_name(Split split) {
  static constexpr EnumNames<Split, 4> kNames{
      {{Split::Train, "train"}, {Split::Validation, "validation"}, {Split::Test, "test"}, {Split::All, "all"}}};
  return enum_name(kNames, split);
}

void DatasetOptions::validate() const {
  if (encoder_length < 1)
    throw UsageError("--encoder-length must be at least 1, got " + std::to_string(encoder_length));
  if (horizon < 1) throw UsageError("--horizon must be at least 1, got " + std::to_string(horizon));
  if (!(validation_fraction > 0 && validation_fraction < 1)) {
    throw UsageError("--validation-fraction must be in (0, 1)");
  }
  if (!(test_fraction >= 0 && test_fraction < 1)) throw UsageError("--test-fraction must be in [0, 1)");
  if (validation_fraction + test_fraction >= 1) {
    throw UsageError("--validation-fraction plus --test-fraction must leave rows to train on");
  }
}

Dataset Dataset::build(const BarSet& bars, const DatasetOptions& options) { return assemble(bars, options, nullptr); }

Dataset Dataset::build(const BarSet& bars, const DatasetOptions& options, const FeatureSpec& spec) {
  return assemble(bars, options, &spec);
}

Dataset Dataset::assemble(const BarSet& bars, const DatasetOptions& options, const FeatureSpec* saved) {
  options.validate();
  BarSpacing spacing;
  for (const auto& s : bars.series) spacing.add(s.timestamp_ns);
  FeaturePlan plan = plan_features(bars.fields, spacing, bars.declared, saved, bars.source);
  if (!saved) {
    SpecFitter fitter(plan.derived, plan.declared, options);
    for (const auto& s : bars.series) fitter.add(s);
    plan.spec = fitter.finish();
  }
  auto owned = std::make_shared<std::vector<SeriesFeatures>>();
  owned->reserve(bars.series.size());
  for (size_t i = 0; i < bars.series.size(); ++i) {
    owned->push_back(dataset_series(bars.series[i], i, bars.series.size(), plan, options, bars.source));
  }
  std::vector<SeriesView> views;
  int64_t unknown = 0;
  for (const auto& f : *owned) {
    views.push_back(view_of(f));
    unknown += f.unknown_category_rows;
  }
  Dataset d = over(options, std::move(plan.spec), bars.source, std::move(views), std::move(owned));
  d.set_notes({bars.declared.unused, bars.leading_null_rows, unknown});
  return d;
}

Dataset Dataset::over(const DatasetOptions& options, FeatureSpec spec, std::string source,
                      std::vector<SeriesView> series, std::shared_ptr<const void> storage, ViewReader reader) {
  options.validate();
  Dataset d;
  d.options_ = options;
  d.spec_ = std::move(spec);
  d.source_ = std::move(source);
  d.series_ = std::move(series);
  d.storage_ = std::move(storage);
  d.reader_ = std::move(reader);
  d.index_windows();
  d.require_a_window_per_split();
  return d;
}

void Dataset::require_a_window_per_split() const {
  const int64_t need = options_.encoder_length + options_.horizon;
  for (Split split : kAllSplits) {
    if (split == Split::Test && options_.test_fraction == 0) continue;
    if (num_windows(split) > 0) continue;
    // A series of n bars has n - 1 feature rows (the first bar has no return).
    size_t longest = 0;
    std::string longest_symbol;
    for (const auto& s : series_) {
      if (s.rows() + 1 >= longest) {
        longest = s.rows() + 1;
        longest_symbol = s.symbol;
      }
    }
    throw Error(source_ + ": too few rows for one " + split_name(split) + " window: a window needs " +
                std::to_string(need) + " consecutive bars (encoder " + std::to_string(options_.encoder_length) +
                " + horizon " + std::to_string(options_.horizon) + ") inside one symbol's " + split_name(split) +
                " split, but the longest symbol '" + longest_symbol + "' has only " + std::to_string(longest) +
                " rows in all");
  }
}

void Dataset::index_windows() {
  for (Split split : {Split::Train, Split::Validation, Split::Test, Split::All}) {
    auto k = static_cast<size_t>(split);
    auto& first = first_window_[k];
    first.assign(series_.size() + 1, 0);
    for (size_t s = 0; s < series_.size(); ++s) {
      const auto& b = series_[s].split_bounds;
      const int64_t rows = split == Split::All ? b[3] - b[0] : b[k + 1] - b[k];
      first[s + 1] = first[s] + static_cast<size_t>(windows_in(rows, options_));
    }
  }
}

size_t Dataset::num_windows(Split split) const { return first_window_[static_cast<size_t>(split)].back(); }

WindowRef Dataset::window(Split split, size_t index) const {
  auto k = static_cast<size_t>(split);
  const auto& first = first_window_[k];
  if (index >= first.back()) {
    throw Error(std::string("window ") + std::to_string(index) + " is out of range for the " + split_name(split) +
                " split of " + std::to_string(first.back()) + " windows");
  }
  // The series whose range [first[s], first[s+1]) holds the index.
  auto s = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), index) - first.begin()) - 1;
  const auto& bounds = series_[s].split_bounds;
  auto start = (split == Split::All ? bounds[0] : bounds[k]) + static_cast<int64_t>(index - first[s]);
  return {static_cast<uint32_t>(s), static_cast<uint32_t>(start)};
}

}  // namespace qtft::data
