// One series' features under a spec: the raw inputs normalized by the spec's statistics (the
// series' own under per-series scaling), categorical levels through its vocabularies, and the
// known inputs of bars ahead; shared by datasets, the feature store and serving.
#include <algorithm>
#include <set>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/local_time.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/detail/features.h"

namespace qtft::data {
namespace {

size_t derived_count(const std::vector<SchemaInput>& stats) {
  return static_cast<size_t>(
      std::count_if(stats.begin(), stats.end(), [](const SchemaInput& f) { return f.source == InputSource::Derived; }));
}

// How a series' categorical cells become features under `stats`: per input, its level
// index + 1 in the spec's vocabulary by the series' own index, 0 for a level the
// vocabulary lacks; empty for a real input.
using CategoryMaps = std::vector<std::vector<double>>;
CategoryMaps category_maps(const std::vector<SchemaInput>& stats, const std::vector<std::vector<std::string>>& levels,
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
void normalize_into(const std::vector<double>& raw, const std::vector<SchemaInput>& stats, const CategoryMaps& maps,
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
void name_unknown_levels(const UnknownCodes& codes, const std::vector<SchemaInput>& stats,
                         const std::vector<std::vector<std::string>>& levels, const std::string& symbol,
                         std::vector<UnknownLevel>& out) {
  const size_t derived = derived_count(stats);
  for (const auto& [j, code] : codes) {
    out.push_back({stats[j].name, series_levels(levels, j - derived, symbol, stats[j].name).at(code)});
  }
}

const InputSchema::SeriesStats& series_stats_of(const InputSchema& spec, int64_t symbol_id) {
  if (symbol_id < 0 || static_cast<size_t>(symbol_id) >= spec.series_stats.size()) {
    throw Error("feature spec: no per-series statistics for symbol id " + std::to_string(symbol_id) + " of " +
                std::to_string(spec.series_stats.size()));
  }
  return spec.series_stats[static_cast<size_t>(symbol_id)];
}

}  // namespace

// The level names of a series' declared column `c` of a kind (BarSeries::observed_levels...).
const std::vector<std::string>& series_levels(const std::vector<std::vector<std::string>>& levels, size_t c,
                                              const std::string& symbol, const std::string& column) {
  if (c >= levels.size() || levels[c].empty()) {
    throw Error("symbol '" + symbol + "': categorical input '" + column +
                "' has no level names (BarSeries::observed_levels, known_levels or static_levels)");
  }
  return levels[c];
}

TargetScaling target_scaling_of(const InputSchema& spec, int64_t symbol_id) {
  if (spec.series_stats.empty()) return {spec.target_center, spec.target_scale};
  const auto& own = series_stats_of(spec, symbol_id);
  return {own.target_center, own.target_scale};
}

SeriesNormalization normalization_of(const InputSchema& spec, int64_t symbol_id) {
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

SeriesFeatures featurize_series(const BarSeries& s, const InputSchema& spec, int64_t symbol_id) {
  RawFeatures raw;
  SeriesFeatures f;
  featurize_series(s, spec, symbol_id, raw, f);
  return f;
}

void featurize_series(const BarSeries& s, const InputSchema& spec, int64_t symbol_id, RawFeatures& raw,
                      SeriesFeatures& f) {
  compute_raw_features(s, spec.derived, spec.calendar_timezone(), spec.target(), raw);
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
  const auto& level = spec.target().column.empty() ? s.close : s.target_values;
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
                                   std::span<const std::vector<double>> declared_known, const InputSchema& spec,
                                   int64_t symbol_id, std::span<const std::vector<std::string>> known_levels,
                                   std::vector<UnknownLevel>* unknown_levels) {
  const auto declared = spec.declared.known_columns();
  for (size_t c = 0; c < declared.size(); ++c) {
    if (c >= declared_known.size() || declared_known[c].size() < timestamps_ns.size()) {
      const size_t given = c < declared_known.size() ? declared_known[c].size() : 0;
      throw Error("the model reads the declared known column '" + declared[c] + "', whose values at future bars are " +
                  "data, not a function of their timestamps: " + std::to_string(timestamps_ns.size()) +
                  " future values needed, " + std::to_string(given) + " given");
    }
  }
  std::vector<int64_t> wall_clock;
  local_wall_clock(timestamps_ns, spec.calendar_timezone(), wall_clock);
  const CalendarFeatures calendar(spec.derived.known);
  std::vector<double> raw;
  raw.reserve(timestamps_ns.size() * spec.known.size());
  // The layout of compute_raw_features: the calendar terms, then the declared columns.
  for (size_t i = 0; i < wall_clock.size(); ++i) {
    calendar.append(wall_clock[i], raw);
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

std::vector<float> known_inputs_at(std::span<const int64_t> timestamps_ns, const InputSchema& spec) {
  return known_inputs_at(timestamps_ns, {}, spec, 0);
}

}  // namespace qtft::data
