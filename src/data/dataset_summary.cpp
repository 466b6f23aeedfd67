#include "qtft/data/dataset_summary.h"

#include <cstdio>

#include "qtft/common/format.h"

namespace qtft::data {
namespace {

std::string names(const std::vector<FeatureStats>& stats) {
  std::string out;
  for (const auto& s : stats) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

std::string stats_line(const FeatureStats& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "    %-18s mean %12.6g  std %12.6g\n", s.name.c_str(), s.mean, s.std);
  return buf;
}

}  // namespace

std::string summarize_dataset(const Dataset& dataset) {
  const auto& o = dataset.options();
  const auto& spec = dataset.spec();
  const auto& series = dataset.series();
  // A series of n bars has n - 1 feature rows: its first bar has no return.
  size_t bars = 0;
  for (const auto& s : series) bars += s.rows() + 1;
  std::string out;
  out += "  rows: " + std::to_string(bars) + " bars, " + std::to_string(series.size()) + " symbol" +
         (series.size() == 1 ? "" : "s") + " (";
  constexpr size_t kListed = 12;  // a desk's hundreds of contracts would fill the screen
  for (size_t i = 0; i < series.size() && i < kListed; ++i) {
    out += (i ? ", " : "") + series[i].symbol + ": " + std::to_string(series[i].rows() + 1);
  }
  if (series.size() > kListed) out += ", and " + std::to_string(series.size() - kListed) + " more";
  out += ")\n";
  if (!series.empty() && series.front().rows() > 0) {
    out += "  time: " + format_utc(series.front().first_bar_ns) + " to " +
           format_utc(series.front().timestamp_ns.back()) + " (first symbol)\n";
  }
  out += "  inputs: observed [" + names(spec.observed) + "], known [" + names(spec.known) + "], static [symbol]\n";
  out += "  target: next " + std::to_string(o.horizon) + " one-bar log returns (scaled by " +
         format_number(spec.target_scale) + ", the training split's std)\n";
  out += "  windows (encoder " + std::to_string(o.encoder_length) + ", horizon " + std::to_string(o.horizon) +
         "): train " + std::to_string(dataset.num_windows(Split::Train)) + ", validation " +
         std::to_string(dataset.num_windows(Split::Validation)) + ", test " +
         std::to_string(dataset.num_windows(Split::Test)) + "\n";
  out += "  normalization (training split only):\n";
  for (const auto& s : spec.observed) out += stats_line(s);
  for (const auto& s : spec.known) out += stats_line(s);
  return out;
}

}  // namespace qtft::data
