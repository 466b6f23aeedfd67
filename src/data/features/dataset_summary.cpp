#include "qtft/data/features/dataset_summary.h"

#include <algorithm>
#include <cstdio>

#include "qtft/common/format.h"
#include "qtft/data/features/detail/features.h"

namespace qtft::data {
namespace {

// A desk's hundreds of contracts or inputs would fill the screen: lists stop at this many.
constexpr size_t kListed = 12;

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kListed; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kListed) out += ", and " + std::to_string(names.size() - kListed) + " more";
  return out;
}

std::string names(const std::vector<SchemaInput>& stats) {
  std::vector<std::string> all;
  for (const auto& s : stats) all.push_back(s.name);
  return listed(all);
}

std::string count_of(const std::vector<SchemaInput>& stats, const char* kind) {
  const auto declared = input_names(stats, InputSource::Column).size();
  const auto categorical = std::count_if(stats.begin(), stats.end(), [](const auto& f) { return f.categorical; });
  std::string out = std::to_string(stats.size()) + " " + kind;
  if (declared > 0) {
    out += " (" + std::to_string(declared) + " declared";
    if (categorical > 0) out += ", " + std::to_string(categorical) + " of them categorical";
    out += ")";
  }
  return out;
}

std::string stats_line(const SchemaInput& s) {
  char buf[160];
  if (s.categorical) {
    std::snprintf(buf, sizeof buf, "    %-18s categorical, %zu levels and an unknown entry\n", s.name.c_str(),
                  s.levels.size());
  } else {
    std::snprintf(buf, sizeof buf, "    %-18s mean %12.6g  std %12.6g\n", s.name.c_str(), s.mean, s.std);
  }
  return buf;
}

}  // namespace

std::string summarize_dataset(const Dataset& dataset) {
  const auto& o = dataset.options();
  const auto& spec = dataset.schema();
  const auto& series = dataset.series();
  // A series of n bars has n - 1 feature rows: its first bar has no return.
  size_t bars = 0;
  for (const auto& s : series) bars += s.rows() + 1;
  std::string out;
  out += "  rows: " + std::to_string(bars) + " bars, " + std::to_string(series.size()) + " symbol" +
         (series.size() == 1 ? "" : "s") + " (";
  for (size_t i = 0; i < series.size() && i < kListed; ++i) {
    out += (i ? ", " : "") + series[i].symbol + ": " + std::to_string(series[i].rows() + 1);
  }
  if (series.size() > kListed) out += ", and " + std::to_string(series.size() - kListed) + " more";
  out += ")\n";
  if (!series.empty() && series.front().rows() > 0) {
    out += "  time: " + format_utc(series.front().first_bar_ns) + " to " +
           format_utc(series.front().timestamp_ns.back()) + " (first symbol)\n";
  }
  out += "  inputs: observed [" + names(spec.observed) + "], known [" + names(spec.known) + "], static [symbol" +
         (spec.statics.empty() ? "" : ", " + names(spec.statics)) + "]\n";
  if (!spec.declared.observed_columns().empty() || !spec.declared.known_columns().empty() || !spec.statics.empty()) {
    // The symbol is the static input every model has.
    std::vector<SchemaInput> statics(1);
    statics[0].name = "symbol";
    statics.insert(statics.end(), spec.statics.begin(), spec.statics.end());
    out += "  input counts: " + count_of(spec.observed, "observed") + ", " + count_of(spec.known, "known") + ", " +
           count_of(statics, "static") + "\n";
  }
  // Said when it is not the intraday calendar in UTC that every model had before.
  const auto calendar = calendar_of(spec.derived);
  if (!spec.calendar_timezone().empty() || calendar != calendar_for_spacing(0)) {
    out += "  calendar: " + calendar_list(calendar, ", ") + " in " +
           (spec.calendar_timezone().empty() ? std::string("UTC") : spec.calendar_timezone()) + "\n";
  }
  const auto& notes = dataset.notes();
  if (!notes.unused_columns.empty()) {
    const auto n = notes.unused_columns.size();
    out += "  not used: " + std::to_string(n) + " column" + (n == 1 ? "" : "s") + ": " + listed(notes.unused_columns) +
           "\n";
  }
  if (notes.leading_null_rows > 0) {
    out += "  dropped: " + std::to_string(notes.leading_null_rows) +
           " leading bars whose declared inputs were still null (a warm-up), counted over every series\n";
  }
  if (notes.unknown_category_rows > 0) {
    out += "  unknown levels: " + std::to_string(notes.unknown_category_rows) +
           " rows hold a categorical level the training split does not have (mapped to the unknown entry)\n";
  }
  const auto& t = spec.target();
  const std::string what = t.transform == TargetTransform::LogReturn ? "one-bar log returns"
                           : t.transform == TargetTransform::None
                               ? "values"
                               : std::string(target_transform_name(t.transform)) + " values";
  const std::string of = t.column.empty() ? (t.is_close_log_return() ? "" : " of the close") : " of '" + t.column + "'";
  if (t.normalize == Normalization::PerSeries) {
    out += "  target: next " + std::to_string(o.horizon) + " " + what + of +
           (t.transform == TargetTransform::LogReturn ? " (scaled" : " (centered and scaled") +
           " per series by its training split's statistics)\n";
  } else if (t.transform == TargetTransform::LogReturn) {
    out += "  target: next " + std::to_string(o.horizon) + " " + what + of + " (scaled by " +
           format_number(spec.target_scale) + ", the training split's std)\n";
  } else {
    out += "  target: next " + std::to_string(o.horizon) + " " + what + of + " (centered on " +
           format_number(spec.target_center) + " and scaled by " + format_number(spec.target_scale) +
           ", the training split's mean and std)\n";
  }
  out += "  windows (encoder " + std::to_string(o.encoder_length) + ", horizon " + std::to_string(o.horizon) +
         "): train " + std::to_string(dataset.num_windows(Split::Train)) + ", validation " +
         std::to_string(dataset.num_windows(Split::Validation)) + ", test " +
         std::to_string(dataset.num_windows(Split::Test)) + "\n";
  out += std::string("  normalization (training split only") +
         (t.normalize == Normalization::PerSeries ? "; per series, pooled shown" : "") + "):\n";
  // Every input's line up to a screenful; the model file and the store hold them all.
  constexpr size_t kStatsLines = 32;
  size_t shown = 0;
  for (const auto* kind : {&spec.observed, &spec.known, &spec.statics}) {
    for (const auto& s : *kind) out += shown++ < kStatsLines ? stats_line(s) : "";
  }
  if (shown > kStatsLines) out += "    and " + std::to_string(shown - kStatsLines) + " more inputs\n";
  return out;
}

}  // namespace qtft::data
