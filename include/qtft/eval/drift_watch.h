#pragma once

// `qtft watch`: is a deployed model still as good as when it was trained? It scores the
// model on recent bars against the validation loss its file recorded and against the naive
// baselines, per series and overall, and, given a reference model (the FP32 one, say),
// applies the rollback rule: more than rollback_pct worse on the same bars.

#include <c10/core/Device.h>

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "qtft/artifact/model_loading.h"
#include "qtft/data/bars/bars.h"
#include "qtft/eval/baselines.h"
#include "qtft/eval/conformal.h"
#include "qtft/eval/desk_metrics.h"
#include "qtft/eval/metrics.h"

namespace qtft::eval {

enum class DriftVerdict { Ok, Degraded, NoBetterThanNaive };
const char* drift_verdict_name(DriftVerdict verdict);  // ok | degraded | no_better_than_naive

struct DriftOptions {
  double degraded_pct = 10.0;  // a loss this far above the recorded validation loss is degraded
  double rollback_pct = 3.0;   // worse than the reference by more than this: roll back
  size_t batch_size = 512;     // each model runs on the device it was loaded on
  double cost_bps = 0.0;       // the desk metrics' trading cost
  // Go on with the model's adaptive conformal offsets (qtft.conformal) over the scored
  // windows of every series, after the bars they already learned from.
  bool adaptive_conformal = false;
};

// What the adaptive conformal offsets did over the windows watch scored for the first time.
struct ConformalWatch {
  QuantileCoverage raw, conformal;
  artifact::ConformalCalibration updated;  // to save with the model
};

struct DriftCheck {
  std::string name;  // the symbol, or "overall"
  size_t windows = 0;
  ForecastMetrics model;
  DeskMetrics desk;                  // the same forecasts as a desk reads them (target units)
  std::vector<std::string> symbols;  // the desk's series names, by id
  BaselineMetrics baselines;
  double change_pct = 0.0;  // the model's loss against the recorded validation loss
  DriftVerdict verdict = DriftVerdict::Ok;
};

struct ReferenceCheck {
  std::string file;
  double reference_loss = 0.0;
  double difference_pct = 0.0;  // the model's loss against the reference's
  bool rollback = false;
};

struct DriftReport {
  double recorded_val_loss = 0.0;
  std::vector<DriftCheck> series;
  DriftCheck overall;
  std::optional<ReferenceCheck> reference;
  std::optional<ConformalWatch> conformal;
  // For cron jobs: 0 every check ok, 3 some degraded, 4 some no better than naive, 5 a
  // rollback advised; the highest that applies.
  int exit_code() const;
};

// Windows each series of `recent` with the model's own features and windows; the newer half
// of its bars is scored, the older half gives the empirical baseline its quantiles. Throws
// qtft::Error naming the file when the model records no validation loss, when a series has
// too few bars, or when the reference normalizes targets differently (losses not comparable);
// under adaptive_conformal, when the model holds no adaptive offsets (artifact::require_conformal).
DriftReport watch_drift(artifact::LoadedModel& model, const data::BarSet& recent, const DriftOptions& options,
                        artifact::LoadedModel* reference = nullptr, const std::string& reference_file = "");

std::string format_drift_report(const DriftReport& report);
nlohmann::json to_json(const DriftReport& report);

}  // namespace qtft::eval
