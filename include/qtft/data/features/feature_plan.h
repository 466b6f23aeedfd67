#pragma once

// Which inputs a dataset computes, and fitting a new model's statistics series by series.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/derived_inputs.h"
#include "qtft/data/features/feature_spec.h"
#include "qtft/data/features/series_features.h"
#include "qtft/data/features/windows.h"

namespace qtft::data {

// Which inputs a dataset computes from its bars and with which normalization. A saved spec
// (a model's) reads only the inputs it was trained on, and names series by its vocabulary.
struct FeaturePlan {
  FeatureSpec spec;
  DerivedInputs derived;     // the inputs computed from the bars, by kind
  DeclaredColumns declared;  // the columns read as inputs, by kind
  bool saved = false;
};

// Fits a FeatureSpec series by series, in the order Dataset::build visits them, so that a
// reader that streams (the feature store) gets bitwise the statistics of one holding every bar.
class SpecFitter {
 public:
  SpecFitter(const DerivedInputs& derived, const DeclaredColumns& declared, const DatasetOptions& options);
  ~SpecFitter();
  SpecFitter(SpecFitter&&) noexcept;
  void add(const BarSeries& series);
  // The same for a series too long to hold at once, given part by part in order: `part`
  // holds bars [first_row, first_row + part.size()) of a series of `series_rows` rows (row r
  // is bar r + 1, as it reads bar r). Parts overlap by one bar; first_row 0 starts a series.
  // The statistics are bitwise those of add() over the whole series.
  void add_part(const BarSeries& part, size_t first_row, int64_t series_rows);
  FeatureSpec finish() const;

 private:
  struct Moments;
  DerivedInputs derived_;
  DeclaredColumns declared_;
  DatasetOptions options_;
  std::vector<std::string> symbols_;
  std::unique_ptr<Moments[]> moments_;                      // observed inputs, then known inputs, then the target
  std::vector<std::unique_ptr<Moments[]>> series_moments_;  // the same per series, when per-series
  std::unique_ptr<RawFeatures> raw_;                        // scratch, reused from series to series
  struct Vocabularies;  // the categoricals' levels seen in training, the static reals' moments
  std::unique_ptr<Vocabularies> vocabularies_;
  size_t observed_count_ = 0, known_count_ = 0;
};

// The plan for bars with these columns: a saved spec's inputs when one is given (throws
// qtft::Error naming `source` when the bars lack them, or carry other declared columns, or
// were read for another calendar), else every input the bars' fields allow, the calendar
// the declaration names or else the one that `spacing` (every gap of the bars) chooses, and
// the declared columns, with the spec left for a SpecFitter to fill.
FeaturePlan plan_features(BarFields fields, const BarSpacing& spacing, const DeclaredColumns& declared,
                          const FeatureSpec* saved, const std::string& source);

// Series `position` of `series_count` as a dataset holds it: features under the plan, split
// by `options`; under a saved spec its symbol id and name come from the spec's vocabulary.
SeriesFeatures dataset_series(const BarSeries& series, size_t position, size_t series_count, const FeaturePlan& plan,
                              const DatasetOptions& options, const std::string& source);
// The same into `out`, with `raw` as scratch, reusing both buffers from series to series.
void dataset_series(const BarSeries& series, size_t position, size_t series_count, const FeaturePlan& plan,
                    const DatasetOptions& options, const std::string& source, RawFeatures& raw, SeriesFeatures& out);

}  // namespace qtft::data
