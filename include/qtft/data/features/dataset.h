#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/derived_inputs.h"
#include "qtft/data/features/unknown_level.h"

namespace qtft::data {

// All: every window of every series, across the splits' bounds too (a deployed model scored
// on a file of new bars: `evaluate --split all`). kAllSplits are the three the model's
// training divides the rows into.
enum class Split { Train = 0, Validation = 1, Test = 2, All = 3 };
inline constexpr std::array<Split, 3> kAllSplits{Split::Train, Split::Validation, Split::Test};
const char* split_name(Split split);

struct DatasetOptions {
  int64_t encoder_length = 64;
  int64_t horizon = 8;
  // Chronological per symbol: the first (1 - validation - test) of each symbol's rows
  // train, the next `validation_fraction` validate, the last `test_fraction` test.
  double validation_fraction = 0.15;
  double test_fraction = 0.15;
  void validate() const;  // throws UsageError naming the flag
};
// Rows [bounds[k], bounds[k+1]) of a series of `rows` rows form split k under `options`.
std::array<int64_t, 4> split_bounds(int64_t rows, const DatasetOptions& options);

struct RawFeatures;

// Where a real input comes from: computed from the bars (log_return, the calendar, ...), or
// a column of the file that the user declared (--observed, --known).
enum class InputSource { Derived, Column };

// Mean and standard deviation of one real input, computed on the training split only; or
// a categorical input's vocabulary, the levels of the training split, whose feature is the
// level's index + 1 (0 for a level not seen in training), left unscaled (mean 0, std 1).
struct FeatureStats {
  std::string name;  // the derived input's name, or the declared column's
  double mean = 0.0;
  double std = 1.0;
  InputSource source = InputSource::Derived;
  bool categorical = false;
  std::vector<std::string> levels;  // a categorical's vocabulary, sorted
  // Rows of an embedding table for this input: the levels and the unknown entry.
  int64_t categories() const { return static_cast<int64_t>(levels.size()) + 1; }
};

// Everything needed to turn new bars into the same features a model was trained on; it is
// saved with the model so that evaluation and prediction normalize exactly as training did.
struct FeatureSpec {
  // Each kind's derived inputs first, then its declared columns in declaration order.
  std::vector<FeatureStats> observed;  // past-only inputs, in column order
  std::vector<FeatureStats> known;     // inputs known for the future too: calendar, declared
  std::vector<std::string> symbols;    // the static categorical's vocabulary
  // Declared static inputs (reals, then categoricals), one value per series; the reals
  // standardized over the series that have training rows, pooled under either normalization.
  std::vector<FeatureStats> statics;
  MissingValues missing = MissingValues::Error;  // how the declared columns' nulls were read
  std::string calendar_timezone;                 // the calendar inputs' tz database zone; empty: UTC
  // What the model forecasts: target = (transformed value - target_center) / target_scale,
  // with the training split's std as the scale; the center is 0 for a log return (a drift
  // of returns is noise, not a level) and the training mean for any other transform.
  TargetDeclaration target;
  double target_center = 0.0;
  double target_scale = 1.0;
  // With target.normalize per-series: each series' statistics, by symbol id, in place of the
  // pooled ones above (which stay, for the names and the fallback of a series too short to
  // have training rows).
  struct SeriesStats {
    std::vector<double> observed_mean, observed_std, known_mean, known_std;
    double target_center = 0.0, target_scale = 1.0;
  };
  std::vector<SeriesStats> series_stats;
};

// How one series is normalized under `spec`: the series' own statistics (per-series) or the
// pooled ones.
struct SeriesNormalization {
  std::vector<FeatureStats> observed, known;
  double target_center = 0.0, target_scale = 1.0;
};
SeriesNormalization normalization_of(const FeatureSpec& spec, int64_t symbol_id);

// The target's own part of it: target value = scaled * scale + center for that series.
struct TargetScaling {
  double center = 0.0, scale = 1.0;
};
TargetScaling target_scaling_of(const FeatureSpec& spec, int64_t symbol_id);

// What reading a source left out, for the data summary.
struct ReadNotes {
  std::vector<std::string> unused_columns;  // columns no input reads
  int64_t leading_null_rows = 0;            // bars dropped before a series' declared inputs begin
  int64_t unknown_category_rows = 0;        // rows with a categorical level not seen in training
};

// One symbol's features, one row per bar from its second bar on (the first has no return).
struct SeriesFeatures {
  std::string symbol;
  int64_t symbol_id = 0;
  std::vector<int64_t> timestamp_ns;
  // The close, or the target column's value when the target has a column of its own: the
  // level that forecasts convert back to.
  std::vector<double> close;
  std::vector<float> observed;               // rows x observed.size(), normalized
  std::vector<float> known;                  // rows x known.size(), normalized
  std::vector<float> target;                 // rows: this bar's (transformed target - center) / scale
  std::vector<float> statics;                // the declared static inputs, normalized, one row
  int64_t unknown_category_rows = 0;         // rows with a categorical level the spec's vocabulary lacks
  std::vector<UnknownLevel> unknown_levels;  // those levels, each once, in input order
  int64_t first_bar_ns = 0;                  // the series' first bar, which has no row of its own
  // Rows [bounds[k], bounds[k+1]) form split k (train, validation, test).
  std::array<int64_t, 4> split_bounds{};
  size_t rows() const { return timestamp_ns.size(); }
};

// One symbol's features as a Dataset holds them: views into memory the Dataset keeps alive
// (its own vectors, or a mapped feature store), so that both read alike.
struct SeriesView {
  std::string symbol;
  int64_t symbol_id = 0;
  std::span<const int64_t> timestamp_ns;
  std::span<const double> close;
  std::span<const float> observed;  // rows x observed inputs
  std::span<const float> known;     // rows x known inputs
  std::span<const float> target;
  std::array<int64_t, 4> split_bounds{};
  int64_t first_bar_ns = 0;        // the series' first bar, which has no row of its own
  std::span<const float> statics;  // the declared static inputs, one row
  size_t rows() const { return timestamp_ns.size(); }
};
SeriesView view_of(const SeriesFeatures& features);

// Which inputs a dataset computes from its bars and with which normalization. A saved spec
// (a model's) reads only the inputs it was trained on, and names series by its vocabulary.
struct FeaturePlan {
  FeatureSpec spec;
  DerivedInputs derived;     // the inputs computed from the bars, by kind
  DeclaredColumns declared;  // the columns read as inputs, by kind
  bool saved = false;
};

// The declared columns a spec reads, by kind, as exact names, and its calendar's zone: how
// bars are read for a model. Its calendar terms are left to the spec (no --calendar).
InputDeclaration declaration_of(const FeatureSpec& spec);
// The names of the inputs in `stats` that come from `source` ("log_return", a column's name).
std::vector<std::string> input_names(const std::vector<FeatureStats>& stats, InputSource source);

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

// One series' features under `spec`, every row, with no split (all rows in split 0): what
// Dataset::build computes per symbol, shared with serving so that the two cannot drift.
SeriesFeatures featurize_series(const BarSeries& series, const FeatureSpec& spec, int64_t symbol_id);
void featurize_series(const BarSeries& series, const FeatureSpec& spec, int64_t symbol_id, RawFeatures& raw,
                      SeriesFeatures& out);
// The known inputs of bars at `timestamps_ns` (UTC), normalized by `spec`: timestamps x
// known. The calendar terms come from the times, on the clock of `spec`'s zone; the declared
// known columns' values are `declared_known` (one vector per column, in the spec's order,
// each at least as long as the times), since they are data, not a function of time.
// Throws qtft::Error naming the first declared column without enough values.
// `symbol_id` picks the series' statistics under per-series normalization; `known_levels`
// are the series' level names of its categorical known columns (BarSeries::known_levels).
// The levels of those columns that the spec's vocabulary lacks take the unknown entry and,
// when `unknown_levels` is given, are appended to it, each once, in input order.
std::vector<float> known_inputs_at(std::span<const int64_t> timestamps_ns,
                                   std::span<const std::vector<double>> declared_known, const FeatureSpec& spec,
                                   int64_t symbol_id, std::span<const std::vector<std::string>> known_levels = {},
                                   std::vector<UnknownLevel>* unknown_levels = nullptr);
// The same for a spec whose known inputs are all derived (the calendar).
std::vector<float> known_inputs_at(std::span<const int64_t> timestamps_ns, const FeatureSpec& spec);
// The spec's derived inputs, by name: each one this qtft computes, of its kind, with the
// target's past exactly when the target is not the close's log return. Throws qtft::Error
// prefixed by `where` otherwise; models saved before bar_gap became an observed input fail
// here, with a note to retrain.
DerivedInputs derived_inputs_of(const FeatureSpec& spec, const std::string& where);
// The spec's derived known inputs alone (the calendar's), checked by name as above.
std::vector<DerivedInput> calendar_inputs_of(const FeatureSpec& spec, const std::string& where);
// The same check, for a loader that needs no answer.
void check_feature_names(const FeatureSpec& spec, const std::string& where);
// The index of `symbol` in the spec's vocabulary. The sole series of a source takes the
// only symbol of a one-symbol model whatever its name: such a model's static input is
// constant, and the same series arrives under other file names (recent.csv for a model
// trained on usdchf_30min.csv). Otherwise throws naming the symbol, the known ones and `source`.
int64_t resolve_symbol_id(const FeatureSpec& spec, const std::string& symbol, bool sole_series,
                          const std::string& source);

// A window: encoder rows [start, start + L), decoder rows [start + L, start + L + H).
struct WindowRef {
  uint32_t series = 0;
  uint32_t start = 0;
};

// Features and windows held compactly: one feature matrix per symbol, windows computed on
// demand from per-symbol counts, so millions of bars cost a few floats each.
class Dataset {
 public:
  // Computes the feature spec (normalization) from the training split.
  static Dataset build(const BarSet& bars, const DatasetOptions& options);
  // Applies a saved spec (evaluation, prediction, fine-tuning on new data).
  static Dataset build(const BarSet& bars, const DatasetOptions& options, const FeatureSpec& spec);
  // Copies `bytes` bytes at `from`, inside one of the series' views, to `to`.
  using ViewReader = std::function<void(const void* from, size_t bytes, void* to)>;
  // Features held elsewhere (a mapped feature store); `storage` keeps the views valid and
  // `reader`, when given, is how batches copy from them (the store reads its file, so that
  // its pages stay in the page cache instead of the process's resident set).
  // Throws qtft::Error naming `source` when a split has no window.
  static Dataset over(const DatasetOptions& options, FeatureSpec spec, std::string source,
                      std::vector<SeriesView> series, std::shared_ptr<const void> storage, ViewReader reader = {});

  const DatasetOptions& options() const { return options_; }
  const FeatureSpec& spec() const { return spec_; }
  const std::string& source() const { return source_; }
  const std::vector<SeriesView>& series() const { return series_; }
  const ReadNotes& notes() const { return notes_; }
  void set_notes(ReadNotes notes) { notes_ = std::move(notes); }
  size_t num_observed() const { return spec_.observed.size(); }
  size_t num_known() const { return spec_.known.size(); }
  size_t num_static() const { return spec_.statics.size(); }
  size_t num_windows(Split split) const;
  // What batches and passes over whole splits use rather than dereferencing the views.
  template <class T>
  void copy(std::span<const T> from, T* to) const {
    if (reader_) {
      reader_(from.data(), from.size_bytes(), to);
    } else {
      std::copy(from.begin(), from.end(), to);
    }
  }
  WindowRef window(Split split, size_t index) const;
  // The index within `split` of series s's first window. A series' windows are consecutive,
  // in order of start: window(split, first_window(split, s) + w) starts w rows after the
  // split's first row of series s.
  size_t first_window(Split split, size_t series) const { return first_window_[static_cast<size_t>(split)][series]; }

 private:
  static Dataset assemble(const BarSet& bars, const DatasetOptions& options, const FeatureSpec* saved);
  void index_windows();
  void require_a_window_per_split() const;

  DatasetOptions options_;
  FeatureSpec spec_;
  std::string source_;
  std::vector<SeriesView> series_;
  ReadNotes notes_;
  std::shared_ptr<const void> storage_;
  ViewReader reader_;
  // first_window_[split][s] = index of series s's first window within the split.
  std::array<std::vector<size_t>, 4> first_window_;  // kAllSplits, then Split::All
};

}  // namespace qtft::data
