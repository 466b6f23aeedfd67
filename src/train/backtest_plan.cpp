// The walk-forward's plan: the flags' words (--refit, --step), the folds over the data's
// clock, what a resumed backtest must share with the one it resumes, and the summary
// across folds.
#include <algorithm>
#include <charconv>
#include <cmath>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/model/tft_options.h"
#include "qtft/train/backtest.h"

namespace qtft::train {

Refit parse_refit(const std::string& name) {
  if (name == "none") return Refit::None;
  if (name == "update") return Refit::Update;
  if (name == "full") return Refit::Full;
  throw UsageError("--refit " + name + ": use none, update or full");
}

const char* refit_name(Refit refit) {
  switch (refit) {
    case Refit::None: return "none";
    case Refit::Update: return "update";
    case Refit::Full: return "full";
  }
  return "?";
}

const char* fold_model_name(FoldModel model) {
  static constexpr EnumNames<FoldModel, 3> kNames{
      {{FoldModel::Trained, "train"}, {FoldModel::Updated, "update"}, {FoldModel::Kept, "none"}}};
  return enum_name(kNames, model);
}

FoldStep parse_fold_step(const std::string& text) {
  int64_t count = 0;
  const char* end = text.data() + text.size();
  const auto [rest, error] = std::from_chars(text.data(), end, count);
  const std::string unit(rest, end);
  const auto bad = [&](const std::string& why) {
    return UsageError("--step " + text + ": " + why +
                      " (500 or 500bars for bars; 30min, 12h, 5d or 2w for a duration)");
  };
  if (error != std::errc() || count <= 0) throw bad("not a positive count");
  constexpr int64_t kMinute = 60LL * 1'000'000'000;
  static const std::pair<const char*, int64_t> kUnits[] = {
      {"min", kMinute}, {"h", 60 * kMinute}, {"d", 1440 * kMinute}, {"w", 7 * 1440 * kMinute}};
  if (unit.empty() || unit == "bars") return {count, 0};
  for (const auto& [name, ns] : kUnits) {
    if (unit != name) continue;
    if (count > std::numeric_limits<int64_t>::max() / ns) throw bad("too long");
    return {0, count * ns};
  }
  throw bad("unknown unit '" + unit + "'");
}

std::string describe_fold_step(const FoldStep& step) {
  if (step.bars > 0) return std::to_string(step.bars) + " bars";
  constexpr int64_t kMinute = 60LL * 1'000'000'000;
  for (const auto& [name, ns] : {std::pair{"w", 7 * 1440 * kMinute}, std::pair{"d", 1440 * kMinute},
                                 std::pair{"h", 60 * kMinute}, std::pair{"min", kMinute}}) {
    if (step.duration_ns % ns == 0) return std::to_string(step.duration_ns / ns) + name;
  }
  return std::to_string(step.duration_ns) + "ns";
}

namespace {

// The median gap between consecutive bars: the data's bar spacing, whatever its nights.
int64_t typical_spacing(std::span<const int64_t> timeline) {
  if (timeline.size() < 2) return 0;
  std::vector<int64_t> gaps(timeline.size() - 1);
  for (size_t i = 1; i < timeline.size(); ++i) gaps[i - 1] = timeline[i] - timeline[i - 1];
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
  return gaps[gaps.size() / 2];
}

// The fewest new bars an update validates on: the update windows its new bars with the
// encoder's history before them (encoder + new bars feature rows), and the newest
// validation fraction of those rows must hold a window (encoder + horizon). An update also
// takes the bars its model validated on, so this is a floor that always suffices.
int64_t fewest_bars_to_update(const FoldPlanOptions& o) {
  if (!(o.validation_fraction > 0 && o.validation_fraction < 1)) {
    throw UsageError("--validation-fraction " + format_number(o.validation_fraction) + ": must lie in (0, 1)");
  }
  const int64_t window = o.encoder_length + o.horizon;
  for (int64_t bars = 1;; ++bars) {
    const int64_t rows = o.encoder_length + bars;
    const auto train_rows = static_cast<int64_t>(std::floor(static_cast<double>(rows) * (1.0 - o.validation_fraction)));
    if (rows - train_rows >= window) return bars;
  }
}

std::string too_few_to_update(const FoldPlanOptions& o, int64_t bars) {
  return "--refit update trains each fold on the bars since the last one and validates on their newest " +
         format_rounded(100.0 * o.validation_fraction) + "%, which needs a window (encoder " +
         std::to_string(o.encoder_length) + " + horizon " + std::to_string(o.horizon) + "): take a step of at least " +
         std::to_string(bars) + " bars, a larger --validation-fraction, or --refit none|full";
}

}  // namespace

std::vector<Fold> plan_folds(std::span<const int64_t> timeline, const FoldPlanOptions& o) {
  const auto n = static_cast<int64_t>(timeline.size());
  if (n == 0) throw Error("the data has no bars");
  const bool by_date = o.initial_train_until_ns.has_value();
  if (by_date == (o.initial_train_bars > 0)) {
    throw UsageError("give --initial-train-until DATE or --initial-train-bars N (one of the two)");
  }
  if ((o.step.bars > 0) == (o.step.duration_ns > 0)) throw UsageError("--step: give a number of bars or a duration");
  if (o.step.bars > 0 && o.step.bars < o.horizon) {
    throw UsageError("--step " + std::to_string(o.step.bars) + ": shorter than the horizon (" +
                     std::to_string(o.horizon) + " bars), so each fold's forecasts would reach past the next fold's");
  }
  const int64_t update_bars = o.updates ? fewest_bars_to_update(o) : 0;
  if (o.step.bars > 0 && o.step.bars < update_bars) {
    throw UsageError("--step " + std::to_string(o.step.bars) + ": " + too_few_to_update(o, update_bars));
  }
  // The last bar the first fold trains on, as an index into the clock.
  int64_t first = 0;
  if (by_date) {
    const int64_t until = *o.initial_train_until_ns;
    first = (std::upper_bound(timeline.begin(), timeline.end(), until) - timeline.begin()) - 1;
    if (first < 0) {
      throw UsageError("--initial-train-until " + format_utc(until) + ": before the data's first bar (" +
                       format_utc(timeline.front()) + ")");
    }
  } else {
    first = o.initial_train_bars - 1;
    if (first >= n) {
      throw UsageError("--initial-train-bars " + std::to_string(o.initial_train_bars) +
                       ": beyond the data, which has " + std::to_string(n) + " bars");
    }
  }
  const std::string initial = by_date ? "--initial-train-until " + format_utc(*o.initial_train_until_ns)
                                      : "--initial-train-bars " + std::to_string(o.initial_train_bars);
  // A window needs encoder + horizon rows, and rows start at a series' second bar.
  const int64_t window_bars = o.encoder_length + o.horizon + 1;
  if (first + 1 < window_bars) {
    throw UsageError(initial + ": " + std::to_string(first + 1) + " bars, fewer than one window needs (" +
                     std::to_string(window_bars) + ": encoder " + std::to_string(o.encoder_length) + " + horizon " +
                     std::to_string(o.horizon) + " + the first bar, which has no return)");
  }
  if (first + o.horizon > n - 1) {
    throw UsageError(initial + ": leaves " + std::to_string(n - 1 - first) + " bars after it (through " +
                     format_utc(timeline.back()) + "), fewer than the horizon (" + std::to_string(o.horizon) +
                     "): nothing to forecast");
  }
  if (o.step.duration_ns > 0) {
    // A duration shorter than the horizon's bars at the data's usual spacing would make
    // every fold's forecasts reach into the next one's.
    const int64_t spacing = typical_spacing(timeline);
    if (spacing > 0 && o.step.duration_ns < o.horizon * spacing) {
      throw UsageError("--step " + describe_fold_step(o.step) + ": shorter than the horizon (" +
                       std::to_string(o.horizon) + " bars of " + describe_fold_step({0, spacing}) +
                       "), so each fold's forecasts would reach past the next fold's");
    }
  }
  std::vector<Fold> folds;
  for (int64_t at = first; at + o.horizon <= n - 1;) {
    int64_t next = n;  // the index of the next fold's last training bar; n: none
    if (o.step.bars > 0) {
      next = std::min(n, at + o.step.bars);
    } else {
      // Step by the calendar; a period that holds fewer bars than the horizon (a night, a
      // weekend, a halt) joins the next one rather than making a fold of its own.
      for (int64_t steps = 1;; ++steps) {
        const int64_t t = timeline[static_cast<size_t>(at)];
        if (t > std::numeric_limits<int64_t>::max() - steps * o.step.duration_ns) break;
        const int64_t until = t + steps * o.step.duration_ns;
        next = (std::upper_bound(timeline.begin(), timeline.end(), until) - timeline.begin()) - 1;
        if (next >= n - 1) {
          next = n;
          break;
        }
        if (next - at >= o.horizon) break;
      }
    }
    Fold fold;
    fold.index = static_cast<int64_t>(folds.size());
    fold.train_through_ns = timeline[static_cast<size_t>(at)];
    fold.forecast_until_ns = next < n ? timeline[static_cast<size_t>(next)] : std::numeric_limits<int64_t>::max();
    fold.bars = std::min(next, n) - at;
    // Every fold but the last gives the next fold's update its new bars.
    if (next < n && fold.bars < update_bars) {
      throw UsageError("--step " + describe_fold_step(o.step) + ": the fold after " +
                       format_utc(fold.train_through_ns) + " holds " + std::to_string(fold.bars) + " bars; " +
                       too_few_to_update(o, update_bars));
    }
    folds.push_back(fold);
    at = next;
  }
  return folds;
}

void check_backtest_options(const BacktestOptions& o) {
  if (o.output.empty()) throw UsageError("--output DIR: where the backtest writes its folds is required");
  if (!std::isfinite(o.cost_bps) || o.cost_bps < 0) {
    throw UsageError("--cost-bps " + format_number(o.cost_bps) + ": must be a non-negative number of basis points");
  }
  if (o.update_epochs < 1) {
    throw UsageError("--update-epochs " + std::to_string(o.update_epochs) + ": must be at least 1");
  }
  if (o.forecast_batch_size < 1) throw UsageError("--eval-batch-size must be at least 1");
  if (!o.setup.load_model.empty() || o.setup.resume || o.setup.update) {
    throw UsageError("a backtest trains its own models: drop --load-model, --resume and --update");
  }
  if (o.int8 && !o.setup.qat.use_qat && !o.setup.qat.two_phase) {
    throw UsageError("--int8 forecasts with each fold's int8 export, which needs a QAT model: add --use-qat");
  }
  if ((o.plan.step.bars > 0) == (o.plan.step.duration_ns > 0)) {
    throw UsageError("--step: give a number of bars or a duration");
  }
  if (o.plan.initial_train_until_ns.has_value() == (o.plan.initial_train_bars > 0)) {
    throw UsageError("give --initial-train-until DATE or --initial-train-bars N (one of the two)");
  }
  if (o.adaptive_conformal_rate && !(*o.adaptive_conformal_rate > 0.0 && *o.adaptive_conformal_rate <= 1.0)) {
    throw UsageError("--conformal-rate " + format_number(*o.adaptive_conformal_rate) + ": must lie in (0, 1]");
  }
  if (o.adaptive_conformal_rate && o.split_conformal) {
    throw UsageError("--conformal: split or adaptive, not both");
  }
  check_training_setup(o.setup);
}

nlohmann::json backtest_identity(const BacktestOptions& o) {
  nlohmann::json identity = training_identity(o.source, o.setup);
  nlohmann::json plan{{"step", describe_fold_step(o.plan.step)}};
  if (o.plan.initial_train_until_ns) {
    plan["initial_train_until"] = format_utc(*o.plan.initial_train_until_ns);
  } else {
    plan["initial_train_bars"] = o.plan.initial_train_bars;
  }
  identity["plan"] = plan;
  identity["refit"] = refit_name(o.refit);
  identity["update_epochs"] = o.update_epochs;
  identity["int8"] = o.int8 ? artifact::int8_kernels_name(o.int8_kernels) : "off";
  identity["cost_bps"] = o.cost_bps;
  // Only when on, so that the folders of backtests without it resume as they were.
  if (o.adaptive_conformal_rate) identity["conformal"] = {{"method", "adaptive"}, {"rate", *o.adaptive_conformal_rate}};
  if (o.split_conformal) identity["conformal"] = {{"method", "split"}};
  return identity;
}

namespace {

// A number at `path` inside `fold` (a fold's record in folds.json), NaN when absent or null.
double figure(const nlohmann::json& fold, const nlohmann::json::json_pointer& path) {
  if (!fold.contains(path)) return std::nan("");
  const auto& v = fold.at(path);
  return v.is_number() ? v.get<double>() : std::nan("");
}

// Mean and standard deviation over the folds where the figure is finite, with the
// t-statistic of the mean (mean / (sd / sqrt(n))) and how many were positive.
AcrossFolds across(const nlohmann::json& folds, const char* path, bool is_signed) {
  std::vector<double> v;
  const nlohmann::json::json_pointer pointer(path);
  for (const auto& fold : folds) {
    const double x = figure(fold, pointer);
    if (std::isfinite(x)) v.push_back(x);
  }
  const auto n = static_cast<double>(v.size());
  double mean = 0.0, ss = 0.0;
  for (double x : v) mean += x / n;
  for (double x : v) ss += (x - mean) * (x - mean);
  AcrossFolds out;
  out.folds = static_cast<int64_t>(v.size());
  if (!v.empty()) out.mean = mean;
  if (v.size() > 1) out.sd = std::sqrt(ss / (n - 1));
  out.is_signed = is_signed;
  if (is_signed) {
    if (out.sd > 0) out.t = mean / (out.sd / std::sqrt(n));
    out.positive_folds = std::count_if(v.begin(), v.end(), [](double x) { return x > 0; });
  }
  return out;
}

nlohmann::json to_json(const AcrossFolds& a) {
  const auto finite_or_null = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  nlohmann::json j{{"mean", finite_or_null(a.mean)}, {"sd", finite_or_null(a.sd)}, {"folds", a.folds}};
  if (a.is_signed) {
    j["t"] = finite_or_null(a.t);
    j["positive_folds"] = a.positive_folds;
  }
  return j;
}

}  // namespace

BacktestSummary summarize_folds(const nlohmann::json& folds) {
  BacktestSummary s;
  s.folds = static_cast<int64_t>(folds.size());
  for (const auto& fold : folds) {
    s.windows += fold.value("windows", int64_t{0});
    s.train_seconds += fold.at("training").value("seconds", 0.0);
    s.forecast_seconds += fold.value("forecast_seconds", 0.0);
  }
  s.loss = across(folds, "/metrics/loss", false);
  s.loss_in_target_units = across(folds, "/metrics/in_target_units/loss", false);
  s.ic_step1 = across(folds, "/desk/ic_pooled/0/ic", true);
  s.ic_across_series_step1 = across(folds, "/desk/ic_across_series/0/ic", true);
  s.interval_coverage = across(folds, "/desk/interval_coverage", false);
  s.hit_rate = across(folds, "/desk/hit_rate", false);
  s.sharpe = across(folds, "/desk/position/sharpe", true);
  s.mean_return = across(folds, "/desk/position/mean_return", true);
  s.conformal_interval_coverage = across(folds, "/conformal/conformal/interval_coverage", false);
  s.conformal_loss_in_target_units = across(folds, "/conformal/conformal/loss_in_target_units", false);
  return s;
}

nlohmann::json to_json(const BacktestSummary& s) {
  nlohmann::json out = {{"folds", s.folds},
                        {"windows", s.windows},
                        {"train_seconds", s.train_seconds},
                        {"forecast_seconds", s.forecast_seconds},
                        {"loss", to_json(s.loss)},
                        {"loss_in_target_units", to_json(s.loss_in_target_units)},
                        {"ic_step1", to_json(s.ic_step1)},
                        {"ic_across_series_step1", to_json(s.ic_across_series_step1)},
                        {"interval_coverage", to_json(s.interval_coverage)},
                        {"hit_rate", to_json(s.hit_rate)},
                        {"sharpe", to_json(s.sharpe)},
                        {"mean_return", to_json(s.mean_return)}};
  if (s.conformal_interval_coverage.folds > 0) {
    out["conformal_interval_coverage"] = to_json(s.conformal_interval_coverage);
    out["conformal_loss_in_target_units"] = to_json(s.conformal_loss_in_target_units);
  }
  return out;
}

}  // namespace qtft::train
