// SchemaFitter: an input schema's statistics and vocabularies from the training split, series
// by series and part by part, bitwise as one pass over every bar would compute them.
#include <algorithm>
#include <cmath>
#include <set>

#include "qtft/common/error.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/features/detail/features.h"

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

}  // namespace

struct SchemaFitter::Moments : data::Moments {};

// Each categorical's levels seen in the training split, by its place in a row of features
// (or among the statics), and the static reals' moments over the series with training rows.
struct SchemaFitter::Vocabularies {
  std::vector<std::set<std::string>> observed, known, statics;  // parallel to the rows' inputs
  std::vector<data::Moments> static_reals;
};

SchemaFitter::SchemaFitter(const InputSchema& planned, const DatasetOptions& options)
    : planned_(planned),
      options_(options),
      observed_count_(planned.derived.observed.size() + planned.declared.observed_columns().size()),
      known_count_(planned.derived.known.size() + planned.declared.known_columns().size()) {
  if (!planned.observed.empty() || !planned.known.empty() || !planned.statics.empty() || !planned.symbols.empty()) {
    throw Error("SchemaFitter: the schema is fitted already (plan_inputs makes one to fit)");
  }
  const InputDeclaration& declared = planned.declared;
  moments_ = std::make_unique<Moments[]>(observed_count_ + known_count_ + 1);
  raw_ = std::make_unique<RawFeatures>();
  vocabularies_ = std::make_unique<Vocabularies>();
  vocabularies_->observed.resize(observed_count_);
  vocabularies_->known.resize(known_count_);
  vocabularies_->statics.resize(declared.static_columns().size());
  vocabularies_->static_reals.resize(declared.statics.size());
}

SchemaFitter::~SchemaFitter() = default;
SchemaFitter::SchemaFitter(SchemaFitter&&) noexcept = default;

void SchemaFitter::add(const BarSeries& s) { add_part(s, 0, s.size() > 0 ? static_cast<int64_t>(s.size()) - 1 : 0); }

void SchemaFitter::add_part(const BarSeries& s, size_t first_row, int64_t series_rows) {
  const InputDeclaration& declared = planned_.declared;
  const bool series_start = first_row == 0;
  if (series_start) symbols_.push_back(s.symbol);
  // Features are recomputed when the dataset is assembled rather than kept: this holds one
  // part's doubles at a time, which matters for files of millions of bars.
  RawFeatures& raw = *raw_;
  compute_raw_features(s, planned_.derived, declared.calendar_timezone, declared.target, raw);
  if (raw.observed_width != observed_count_ || raw.known_width != known_count_ ||
      raw.statics.size() != vocabularies_->statics.size()) {
    throw Error("symbol '" + s.symbol + "': carries " + std::to_string(s.declared_observed.size()) + " observed, " +
                std::to_string(s.declared_known.size()) + " known and " + std::to_string(s.declared_static.size()) +
                " static declared columns, the other series " + std::to_string(declared.observed_columns().size()) +
                ", " + std::to_string(declared.known_columns().size()) + " and " +
                std::to_string(declared.static_columns().size()));
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
  collect(observed_count_, observed_count_ - s.declared_observed.size(), declared.observed.size(),
          declared.observed_categorical, raw.observed, train_end, s.observed_levels, v.observed);
  collect(known_count_, known_count_ - s.declared_known.size(), declared.known.size(), declared.known_categorical,
          raw.known, train_end, s.known_levels, v.known);
  // Statics count once per series that trains.
  if (series_start && series_train_end > 0) {
    for (size_t k = 0; k < v.static_reals.size(); ++k) v.static_reals[k].add(raw.statics[k]);
    collect(raw.statics.size(), 0, declared.statics.size(), declared.static_categorical, raw.statics, 1,
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
  if (declared.target.normalize == Normalization::PerSeries) {
    if (series_start) series_moments_.push_back(std::make_unique<Moments[]>(observed_count_ + known_count_ + 1));
    add_rows(series_moments_.back().get());
  }
}

InputSchema SchemaFitter::finish() const {
  const InputDeclaration& declared = planned_.declared;
  InputSchema spec = planned_;
  spec.declared.from_model = true;  // a model's schema from here on: its errors say so
  spec.symbols = symbols_;
  // Derived inputs first, then the declared columns, as compute_raw_features lays out a row.
  auto names_and_sources = [](std::vector<std::string> derived, const std::vector<std::string>& columns) {
    std::vector<std::pair<std::string, InputSource>> out;
    for (auto& name : derived) out.emplace_back(std::move(name), InputSource::Derived);
    for (const auto& name : columns) out.emplace_back(name, InputSource::Column);
    return out;
  };
  const auto observed_names = names_and_sources(names_of(planned_.derived.observed), declared.observed_columns());
  const auto known_names = names_and_sources(names_of(planned_.derived.known), declared.known_columns());
  const Moments* observed = moments_.get();
  const Moments* known = observed + observed_count_;
  const auto& v = *vocabularies_;
  // A categorical is left unscaled: its feature is its vocabulary index.
  auto input = [](const std::pair<std::string, InputSource>& name, const Moments& m,
                  const std::set<std::string>& levels, bool categorical) {
    SchemaInput f{name.first, m.mean, m.std_or_one(), name.second, false, {}};
    if (categorical) {
      f = {name.first, 0.0, 1.0, name.second, true, std::vector<std::string>(levels.begin(), levels.end())};
      if (f.levels.empty()) throw Error("categorical input '" + name.first + "' has no value in the training split");
    }
    return f;
  };
  const size_t first_observed_categorical = observed_count_ - declared.observed_categorical.size();
  const size_t first_known_categorical = known_count_ - declared.known_categorical.size();
  for (size_t j = 0; j < observed_count_; ++j)
    spec.observed.push_back(input(observed_names[j], observed[j], v.observed[j], j >= first_observed_categorical));
  for (size_t j = 0; j < known_count_; ++j)
    spec.known.push_back(input(known_names[j], known[j], v.known[j], j >= first_known_categorical));
  const auto static_names = names_and_sources({}, declared.static_columns());
  for (size_t k = 0; k < static_names.size(); ++k) {
    const bool categorical = k >= declared.statics.size();
    spec.statics.push_back(
        input(static_names[k], categorical ? Moments{} : Moments{v.static_reals[k]}, v.statics[k], categorical));
  }
  // A log return is scaled, not centered (today's models, bitwise); any other target is both.
  const bool centered = declared.target.transform != TargetTransform::LogReturn;
  spec.target_center = centered ? known[known_count_].mean : 0.0;
  spec.target_scale = known[known_count_].std_or_one();
  for (const auto& own : series_moments_) {
    const Moments* o = own.get();
    const Moments* k = o + observed_count_;
    InputSchema::SeriesStats stats;
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

}  // namespace qtft::data
