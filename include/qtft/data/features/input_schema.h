#pragma once

// The schema of a model's inputs, saved with it: each input's producer, statistics or
// vocabulary, and the target's scaling; and what reads it back by name.
#include <cstdint>
#include <string>
#include <vector>

#include "qtft/data/bars/derived_inputs.h"
#include "qtft/data/bars/input_declaration.h"

namespace qtft::data {

// Where an input's values come from: computed from the bars (log_return, the calendar, ...),
// or a column of the file that the user declared (--observed, --known).
enum class InputSource { Derived, Column };

// One input of a schema as fitted on the training split: its name (the derived input's or
// the column's), its source, and the mean and standard deviation of a real input; or a
// categorical input's vocabulary, the levels of the training split, whose feature is the
// level's index + 1 (0 for a level not seen in training), left unscaled (mean 0, std 1).
struct SchemaInput {
  std::string name;
  double mean = 0.0;
  double std = 1.0;
  InputSource source = InputSource::Derived;
  bool categorical = false;
  std::vector<std::string> levels;  // a categorical's vocabulary, sorted
  // Rows of an embedding table for this input: the levels and the unknown entry.
  int64_t categories() const { return static_cast<int64_t>(levels.size()) + 1; }
};

// A model's inputs, one value: what produces each, its fitted statistics or vocabulary, and
// the target with its transform and scaling. plan_inputs makes its producers from the bars
// and the declaration, a SchemaFitter fits the rest on the training split; the model file
// and the feature store save it; featurization, batches, the model's options, Forecaster,
// explain and the report read it. Saved with the model, it turns new bars into exactly the
// features the model was trained on.
struct InputSchema {
  // The producers. `derived`: the inputs computed from the bars, by kind (the known ones are
  // the calendar's terms). `declared`: the file's columns read as inputs, by kind, as exact
  // names, with how their nulls read (missing), the calendar's tz database zone (empty:
  // UTC) and the target; its `calendar` stays unset, the terms being `derived.known`.
  DerivedInputs derived;
  InputDeclaration declared;
  // Each kind's inputs in the order a row of features holds them: the derived inputs first,
  // then the declared columns, reals before categoricals. Fitted: filled by a SchemaFitter
  // or read from a saved model; empty while only planned.
  std::vector<SchemaInput> observed;  // past-only inputs
  std::vector<SchemaInput> known;     // inputs known for the future too: calendar, declared
  std::vector<SchemaInput> statics;   // declared static inputs, one value per series; the
                                      // reals standardized over the series with training rows
  std::vector<std::string> symbols;   // the static categorical's vocabulary
  // What the model forecasts: target = (transformed value - target_center) / target_scale,
  // with the training split's std as the scale; the center is 0 for a log return (a drift
  // of returns is noise, not a level) and the training mean for any other transform.
  double target_center = 0.0;
  double target_scale = 1.0;
  // With target normalize per-series: each series' statistics, by symbol id, in place of the
  // pooled ones above (which stay, for the names and the fallback of a series too short to
  // have training rows).
  struct SeriesStats {
    std::vector<double> observed_mean, observed_std, known_mean, known_std;
    double target_center = 0.0, target_scale = 1.0;
  };
  std::vector<SeriesStats> series_stats;

  const TargetDeclaration& target() const { return declared.target; }
  MissingValues missing() const { return declared.missing; }
  const std::string& calendar_timezone() const { return declared.calendar_timezone; }
};

// A schema's producers from its fitted inputs' names: what a loader calls on a saved schema
// (the file holds names). Sets `derived` and `declared` (from_model) from `observed`, `known`
// and `statics`, keeping `declared`'s missing values, zone and target. Throws qtft::Error
// prefixed by `where` for a name that is not a derived input this qtft computes of its kind,
// or derived inputs that do not match the target; models saved before bar_gap became an
// observed input fail here, with a note to retrain.
void resolve_producers(InputSchema& schema, const std::string& where);

// How one series is normalized under `spec`: the series' own statistics (per-series) or the
// pooled ones.
struct SeriesNormalization {
  std::vector<SchemaInput> observed, known;
  double target_center = 0.0, target_scale = 1.0;
};
SeriesNormalization normalization_of(const InputSchema& schema, int64_t symbol_id);

// The target's own part of it: target value = scaled * scale + center for that series.
struct TargetScaling {
  double center = 0.0, scale = 1.0;
};
TargetScaling target_scaling_of(const InputSchema& schema, int64_t symbol_id);

// The names of the inputs in `inputs` that come from `source` ("log_return", a column's name).
std::vector<std::string> input_names(const std::vector<SchemaInput>& inputs, InputSource source);

// The index of `symbol` in the schema's vocabulary. The sole series of a source takes the
// only symbol of a one-symbol model whatever its name: such a model's static input is
// constant, and the same series arrives under other file names (recent.csv for a model
// trained on usdchf_30min.csv). Otherwise throws naming the symbol, the known ones and `source`.
int64_t resolve_symbol_id(const InputSchema& schema, const std::string& symbol, bool sole_series,
                          const std::string& source);

}  // namespace qtft::data
