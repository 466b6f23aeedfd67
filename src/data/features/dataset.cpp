#include "qtft/data/features/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"

namespace qtft::data {
namespace {

int64_t windows_in(int64_t rows, const DatasetOptions& o) {
  return std::max<int64_t>(0, rows - (o.encoder_length + o.horizon) + 1);
}

}  // namespace

SeriesView view_of(const SeriesFeatures& f) {
  return {f.symbol, f.symbol_id, f.timestamp_ns, f.close,        f.observed,
          f.known,  f.target,    f.split_bounds, f.first_bar_ns, f.statics};
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

Dataset Dataset::build(const BarSet& bars, const DatasetOptions& options, const InputSchema& spec) {
  return assemble(bars, options, &spec);
}

Dataset Dataset::assemble(const BarSet& bars, const DatasetOptions& options, const InputSchema* saved) {
  options.validate();
  BarSpacing spacing;
  for (const auto& s : bars.series) spacing.add(s.timestamp_ns);
  InputSchema schema;
  if (saved) {
    check_bars_fit(bars.fields, bars.declared, *saved, bars.source);
    schema = *saved;
  } else {
    SchemaFitter fitter(plan_inputs(bars.fields, spacing, bars.declared, bars.source), options);
    for (const auto& s : bars.series) fitter.add(s);
    schema = fitter.finish();
  }
  auto owned = std::make_shared<std::vector<SeriesFeatures>>();
  owned->reserve(bars.series.size());
  for (size_t i = 0; i < bars.series.size(); ++i) {
    owned->push_back(dataset_series(bars.series[i], i, bars.series.size(), schema, options, bars.source));
  }
  std::vector<SeriesView> views;
  int64_t unknown = 0;
  for (const auto& f : *owned) {
    views.push_back(view_of(f));
    unknown += f.unknown_category_rows;
  }
  Dataset d = over(options, std::move(schema), bars.source, std::move(views), std::move(owned));
  d.set_notes({bars.unused_columns, bars.leading_null_rows, unknown});
  return d;
}

Dataset Dataset::over(const DatasetOptions& options, InputSchema spec, std::string source,
                      std::vector<SeriesView> series, std::shared_ptr<const void> storage, ViewReader reader) {
  options.validate();
  Dataset d;
  d.options_ = options;
  d.schema_ = std::move(spec);
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
