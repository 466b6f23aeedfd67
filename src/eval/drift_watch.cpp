#include "qtft/eval/drift_watch.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/eval/conformal_walk.h"
#include "qtft/eval/evaluate.h"

namespace qtft::eval {
namespace {

// The newer half of every series is scored (the validation split); the older half trains
// nothing and only gives the empirical baseline its quantiles.
data::Dataset recent_windows(const data::BarSet& bars, const artifact::ModelFile& file) {
  auto options = file.dataset;
  options.validation_fraction = 0.5;
  options.test_fraction = 0;
  return data::Dataset::build(bars, options, file.features);
}

DriftCheck check(const std::string& name, artifact::LoadedModel& model, const data::Dataset& dataset, double recorded,
                 const DriftOptions& options, AdaptiveConformalWalk* walk = nullptr) {
  DriftCheck c;
  c.name = name;
  c.windows = dataset.num_windows(data::Split::Validation);
  auto evaluation = evaluate_for_desk(model.model, dataset, data::Split::Validation, options.batch_size, model.device,
                                      options.cost_bps, [&](const data::Batch& batch, const model::TftOutput& out) {
                                        if (walk) walk->add(dataset, batch, out);
                                      });
  c.model = evaluation.metrics;
  c.desk = std::move(evaluation.desk);
  c.symbols = dataset.schema().symbols;
  c.baselines = evaluate_baselines(dataset, data::Split::Validation, model.model->options().quantiles());
  c.change_pct = 100.0 * (c.model.loss - recorded) / recorded;
  if (c.model.loss >= c.baselines.best().loss) {
    c.verdict = DriftVerdict::NoBetterThanNaive;
  } else if (c.change_pct > options.degraded_pct) {
    c.verdict = DriftVerdict::Degraded;
  }
  return c;
}

}  // namespace

const char* drift_verdict_name(DriftVerdict verdict) {
  static constexpr EnumNames<DriftVerdict, 3> kNames{{{DriftVerdict::Ok, "ok"},
                                                      {DriftVerdict::Degraded, "degraded"},
                                                      {DriftVerdict::NoBetterThanNaive, "no_better_than_naive"}}};
  return enum_name(kNames, verdict);
}

int DriftReport::exit_code() const {
  if (reference && reference->rollback) return 5;
  int code = 0;
  auto consider = [&](const DriftCheck& c) {
    if (c.verdict == DriftVerdict::NoBetterThanNaive) code = std::max(code, 4);
    if (c.verdict == DriftVerdict::Degraded) code = std::max(code, 3);
  };
  for (const auto& c : series) consider(c);
  consider(overall);
  return code;
}

DriftReport watch_drift(artifact::LoadedModel& model, const data::BarSet& recent, const DriftOptions& options,
                        artifact::LoadedModel* reference, const std::string& reference_file) {
  const auto& file = model.file;
  if (!file.training || !(file.training->best_val_loss < std::numeric_limits<double>::infinity())) {
    throw Error("the model records no validation loss (no training state): watch compares against it");
  }
  DriftReport report;
  report.recorded_val_loss = file.training->best_val_loss;
  model.model->eval();
  for (const auto& series : recent.series) {
    data::BarSet one;  // the series alone, with the set's columns (not a copy of every series)
    one.source = recent.source;
    one.fields = recent.fields;
    one.declared = recent.declared;
    one.series = {series};
    try {
      report.series.push_back(
          check(series.symbol, model, recent_windows(one, file), report.recorded_val_loss, options));
    } catch (const Error& e) {
      throw Error(recent.source + ": symbol '" + series.symbol + "': " + e.what());
    }
  }
  const auto all = recent_windows(recent, file);
  std::optional<AdaptiveConformalWalk> walk;
  if (options.adaptive_conformal) {
    walk = AdaptiveConformalWalk::from_calibration(artifact::require_conformal(file, "adaptive", "the model"),
                                                   file.options.quantiles(), file.options.horizon());
  }
  report.overall = check("overall", model, all, report.recorded_val_loss, options, walk ? &*walk : nullptr);
  if (walk) report.conformal = ConformalWatch{walk->raw(), walk->conformal(), walk->calibration()};
  if (reference) {
    const double scale = reference->file.features.target_scale;
    if (scale != file.features.target_scale) {
      throw Error(reference_file + ": scales its targets by " + format_number(scale) + ", the model by " +
                  format_number(file.features.target_scale) +
                  ": their losses are not comparable (train the reference on the same data)");
    }
    reference->model->eval();
    ReferenceCheck r;
    r.file = reference_file;
    r.reference_loss = evaluate_model(reference->model, recent_windows(recent, reference->file),
                                      data::Split::Validation, options.batch_size, reference->device)
                           .loss;
    r.difference_pct = 100.0 * (report.overall.model.loss - r.reference_loss) / r.reference_loss;
    r.rollback = r.difference_pct > options.rollback_pct;
    report.reference = r;
  }
  return report;
}

std::string format_drift_report(const DriftReport& report) {
  std::string out;
  char buf[256];
  auto line = [&](const DriftCheck& c) {
    std::string verdict = drift_verdict_name(c.verdict);
    if (c.verdict == DriftVerdict::Degraded) {
      std::snprintf(buf, sizeof buf, "degraded by %.1f%%", c.change_pct);
      verdict = buf;
    } else if (c.verdict == DriftVerdict::NoBetterThanNaive) {
      verdict = "no better than naive (" + c.baselines.best_name() + ")";
    }
    std::snprintf(buf, sizeof buf,
                  "  %-12s loss %.5f (recorded %.5f, %+.1f%%), best naive %.5f, %zu windows: ", c.name.c_str(),
                  c.model.loss, report.recorded_val_loss, c.change_pct, c.baselines.best().loss, c.windows);
    out += buf + verdict + "\n" + "    as a desk reads it: " + summarize_desk_metrics(c.desk) + "\n";
  };
  for (const auto& c : report.series) line(c);
  line(report.overall);
  if (report.reference) {
    const auto& r = *report.reference;
    std::snprintf(buf, sizeof buf, "  reference %s: loss %.5f; the model is %+.1f%% against it: ", r.file.c_str(),
                  r.reference_loss, r.difference_pct);
    out += buf;
    out += r.rollback ? "roll back to " + r.file + "\n" : std::string("keep the model\n");
  }
  if (report.conformal) {
    const auto& c = *report.conformal;
    if (c.raw.outcomes == 0) {
      out += "  adaptive conformal: no bar after those its offsets learned from\n";
    } else {
      std::snprintf(buf, sizeof buf,
                    "  adaptive conformal over %lld new outcomes: interval coverage %.3f (raw %.3f), loss %.5f (raw "
                    "%.5f)\n",
                    static_cast<long long>(c.raw.outcomes), c.conformal.interval, c.raw.interval, c.conformal.loss,
                    c.raw.loss);
      out += buf;
    }
  }
  return out;
}

nlohmann::json to_json(const DriftReport& report) {
  auto check_json = [](const DriftCheck& c) {
    return nlohmann::json{{"name", c.name},
                          {"windows", c.windows},
                          {"loss", c.model.loss},
                          {"change_pct", c.change_pct},
                          {"verdict", drift_verdict_name(c.verdict)},
                          {"desk", to_json(c.desk, c.symbols)},
                          {"baselines", to_json(c.baselines)}};
  };
  nlohmann::json series = nlohmann::json::array();
  for (const auto& c : report.series) series.push_back(check_json(c));
  nlohmann::json out{{"recorded_val_loss", report.recorded_val_loss},
                     {"series", series},
                     {"overall", check_json(report.overall)},
                     {"exit_code", report.exit_code()}};
  if (report.reference) {
    const auto& r = *report.reference;
    out["reference"] = {
        {"file", r.file}, {"loss", r.reference_loss}, {"difference_pct", r.difference_pct}, {"rollback", r.rollback}};
  }
  if (report.conformal) {
    const auto& c = *report.conformal;
    out["conformal"] = {{"method", "adaptive"},
                        {"raw", to_json(c.raw, false)},
                        {"conformal", to_json(c.conformal, false)},
                        {"offsets", artifact::to_json(c.updated)}};
  }
  return out;
}

}  // namespace qtft::eval
