#pragma once

// A new model's input schema: its producers planned from the bars, then fitted series by series.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/derived_inputs.h"
#include "qtft/data/features/input_schema.h"
#include "qtft/data/features/series_features.h"
#include "qtft/data/features/windows.h"

namespace qtft::data {

// Fits a planned schema series by series, in the order Dataset::build visits them, so that a
// reader that streams (the feature store) gets bitwise the statistics of one holding every bar.
class SchemaFitter {
 public:
  SchemaFitter(const InputSchema& planned, const DatasetOptions& options);
  ~SchemaFitter();
  SchemaFitter(SchemaFitter&&) noexcept;
  void add(const BarSeries& series);
  // The same for a series too long to hold at once, given part by part in order: `part`
  // holds bars [first_row, first_row + part.size()) of a series of `series_rows` rows (row r
  // is bar r + 1, as it reads bar r). Parts overlap by one bar; first_row 0 starts a series.
  // The statistics are bitwise those of add() over the whole series.
  void add_part(const BarSeries& part, size_t first_row, int64_t series_rows);
  // The planned schema with its inputs fitted.
  InputSchema finish() const;

 private:
  struct Moments;
  InputSchema planned_;
  DatasetOptions options_;
  std::vector<std::string> symbols_;
  std::unique_ptr<Moments[]> moments_;                      // observed inputs, then known inputs, then the target
  std::vector<std::unique_ptr<Moments[]>> series_moments_;  // the same per series, when per-series
  std::unique_ptr<RawFeatures> raw_;                        // scratch, reused from series to series
  struct Vocabularies;  // the categoricals' levels seen in training, the static reals' moments
  std::unique_ptr<Vocabularies> vocabularies_;
  size_t observed_count_ = 0, known_count_ = 0;
};

// A new model's schema for bars with these columns, planned, for a SchemaFitter to fit:
// every derived input the bars' fields allow, the calendar the declaration names or else
// the one that `spacing` (every gap of the bars) chooses, and the declared columns. Throws
// UsageError naming `source` when the decoder would have no input.
InputSchema plan_inputs(BarFields fields, const BarSpacing& spacing, const InputDeclaration& declared,
                        const std::string& source);
// Throws qtft::Error naming `source` when bars with these columns, read under `declared`,
// cannot feed `saved`'s model: they lack a bar field it reads, or carry other declared
// columns, or were read for another calendar or target.
void check_bars_fit(BarFields fields, const InputDeclaration& declared, const InputSchema& saved,
                    const std::string& source);

// Series `position` of `series_count` as a dataset holds it: features under the fitted
// schema, split by `options`; its symbol id and name from the schema's vocabulary.
SeriesFeatures dataset_series(const BarSeries& series, size_t position, size_t series_count, const InputSchema& schema,
                              const DatasetOptions& options, const std::string& source);
// The same into `out`, with `raw` as scratch, reusing both buffers from series to series.
void dataset_series(const BarSeries& series, size_t position, size_t series_count, const InputSchema& schema,
                    const DatasetOptions& options, const std::string& source, RawFeatures& raw, SeriesFeatures& out);

}  // namespace qtft::data
