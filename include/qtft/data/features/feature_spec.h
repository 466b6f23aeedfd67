#pragma once

// The fitted description of a model's inputs, saved with it: each input's name, source,
// statistics or vocabulary, and the target's scaling; and what reads it back by name.
#include <cstdint>
#include <string>
#include <vector>

#include "qtft/data/bars/derived_inputs.h"
#include "qtft/data/bars/input_declaration.h"

namespace qtft::data {

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

// The declared columns a spec reads, by kind, as exact names, and its calendar's zone: how
// bars are read for a model. Its calendar terms are left to the spec (no --calendar).
InputDeclaration declaration_of(const FeatureSpec& spec);
// The names of the inputs in `stats` that come from `source` ("log_return", a column's name).
std::vector<std::string> input_names(const std::vector<FeatureStats>& stats, InputSource source);

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

}  // namespace qtft::data
