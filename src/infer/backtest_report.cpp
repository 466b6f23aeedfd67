#include "qtft/infer/backtest_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/backtest_forecasts.h"
#include "qtft/infer/detail/report_page.h"
#include "qtft/infer/detail/svg_chart.h"
#include "qtft/io/atomic_file.h"
#include "qtft/train/backtest.h"

namespace qtft::infer {
namespace {

using detail::cell;
using detail::escape_html;
using detail::kBlue;
using detail::kGreen;
using detail::kGrey;
using detail::kOrange;
using detail::number_at;
using detail::section;
using detail::SvgChart;
namespace fs = std::filesystem;
using Json = nlohmann::json;

Json read_record(const fs::path& folder) {
  const fs::path record = folder / "folds.json";
  std::error_code ec;
  if (!fs::exists(record, ec)) {
    throw UsageError(folder.string() +
                     ": not a backtest's output (no folds.json); give the --output folder of qtft "
                     "backtest");
  }
  Json doc;
  try {
    std::ifstream in(record);
    doc = Json::parse(in);
  } catch (const Json::exception& e) {
    throw UsageError(record.string() + ": not readable JSON (" + e.what() + ")");
  }
  if (!doc.is_object() || doc.value("format", "") != train::kBacktestFormat || !doc.contains("folds") ||
      !doc.at("folds").is_array() || !doc.contains("options")) {
    throw UsageError(record.string() + ": not a qtft backtest's record (format " + train::kBacktestFormat + ")");
  }
  if (!doc.value("complete", false) || !fs::exists(folder / "forecasts.parquet", ec)) {
    throw UsageError(folder.string() + ": the backtest is not finished (" + std::to_string(doc.at("folds").size()) +
                     " of " + std::to_string(doc.value("planned_folds", 0)) +
                     " folds): run the same qtft backtest command again to finish it, then report");
  }
  return doc;
}

// The windows' options as a reader says them: "encoder 48 bars, horizon 12 bars;
// validation 10%, test 0% of each fold's training bars" (the raw JSON when not an object).
std::string windows_text(const Json& w) {
  if (!w.is_object()) return w.dump();
  auto percent = [](const Json& fraction) { return format_number(100.0 * fraction.get<double>()) + "%"; };
  return "encoder " + w.value("encoder_length", Json()).dump() + " bars, horizon " + w.value("horizon", Json()).dump() +
         " bars; validation " + percent(w.value("validation_fraction", Json(0.0))) + ", test " +
         percent(w.value("test_fraction", Json(0.0))) + " of each fold's training bars";
}

std::string options_table(const Json& o) {
  std::string rows;
  const auto row = [&](const std::string& name, const std::string& value) {
    rows += "<tr><th>" + escape_html(name) + "</th><td>" + escape_html(value) + "</td></tr>\n";
  };
  const auto& plan = o.at("plan");
  row("first fold", plan.contains("initial_train_until")
                        ? "trained through " + plan.at("initial_train_until").dump()
                        : "trained on " + plan.at("initial_train_bars").dump() + " bars");
  row("step", plan.value("step", ""));
  row("refit between folds",
      o.value("refit", "") +
          (o.value("refit", "") == "update" ? " (" + o.at("update_epochs").dump() + " epochs)" : ""));
  row("forecasts with", o.value("int8", "off") == "off" ? "the trained model" : "its int8 export");
  row("QAT", o.at("qat").value("use_qat", false) ? "yes" : "no");
  row("cost of the position", o.at("cost_bps").dump() + " bps per unit traded");
  row("windows", windows_text(o.at("windows")));
  return "<table class=\"options\">" + rows + "</table>\n";
}

std::string summary_table(const Json& s) {
  std::string rows;
  const auto row = [&](const char* name, const char* key, bool with_t, const char* format = "%.4f") {
    const auto& f = s.at(key);
    const int64_t counted = f.value("folds", 0);
    rows += std::string("<tr><th>") + name + "</th><td>" + cell(number_at(f, Json::json_pointer("/mean")), format) +
            "</td><td>" + cell(number_at(f, Json::json_pointer("/sd")), format) + "</td><td>" +
            (with_t ? cell(number_at(f, Json::json_pointer("/t")), "%.2f") + "</td><td>" +
                          (counted > 0 ? std::to_string(f.value("positive_folds", 0)) + " of " + std::to_string(counted)
                                       : std::string("n/a"))
                    : std::string("</td><td>")) +
            "</td></tr>\n";
  };
  row("loss (scaled)", "loss", false);
  row("IC, first step", "ic_step1", true);
  row("IC across series, first step", "ic_across_series_step1", true);
  row("central interval coverage", "interval_coverage", false);
  if (s.contains("conformal_interval_coverage")) {
    row("conformal coverage", "conformal_interval_coverage", false);
  }
  row("sign hit rate", "hit_rate", false);
  row("Sharpe", "sharpe", true);
  row("mean return per bar", "mean_return", true, "%.3g");
  return "<table><tr><th>across folds</th><th>mean</th><th>sd</th><th>t</th><th>positive</th></tr>\n" + rows +
         "</table>\n<p>" + std::to_string(s.value("folds", 0)) + " folds, " + std::to_string(s.value("windows", 0)) +
         " windows; training " + cell(s.value("train_seconds", NAN), "%.1f") + " s, forecasting " +
         cell(s.value("forecast_seconds", NAN), "%.1f") + " s.</p>\n";
}

std::string fold_table(const Json& folds) {
  std::string out =
      "<table><tr><th>fold</th><th>trained through</th><th>forecasts until</th><th>model</th><th>epochs</th>"
      "<th>train s</th><th>windows</th><th>loss</th><th>IC (t)</th><th>coverage</th><th>hit rate</th>"
      "<th>Sharpe</th></tr>\n";
  for (const auto& f : folds) {
    const auto& t = f.at("training");
    out += "<tr><td>" + f.at("fold").dump() + "</td><td>" + escape_html(f.value("train_through", "")) + "</td><td>" +
           escape_html(f.at("forecast_until").is_string() ? f.at("forecast_until").get<std::string>() : "the end") +
           "</td><td>" + escape_html(t.value("kind", "")) + "</td><td>" + t.at("epochs").dump() + "</td><td>" +
           cell(t.value("seconds", NAN), "%.1f") + "</td><td>" + f.at("windows").dump() + "</td><td>" +
           cell(number_at(f, Json::json_pointer("/metrics/loss"))) + "</td><td>" +
           cell(number_at(f, Json::json_pointer("/desk/ic_pooled/0/ic"))) + " (" +
           cell(number_at(f, Json::json_pointer("/desk/ic_pooled/0/t")), "%.1f") + ")</td><td>" +
           cell(number_at(f, Json::json_pointer("/desk/interval_coverage")), "%.3f") + "</td><td>" +
           cell(number_at(f, Json::json_pointer("/desk/hit_rate")), "%.3f") + "</td><td>" +
           cell(number_at(f, Json::json_pointer("/desk/position/sharpe")), "%.2f") + "</td></tr>\n";
  }
  return out + "</table>\n";
}

// One figure per fold, as bars or a line.
std::vector<double> per_fold(const Json& folds, const char* path) {
  std::vector<double> v;
  for (const auto& f : folds) v.push_back(number_at(f, Json::json_pointer(path)));
  return v;
}

std::string across_folds_charts(const Json& folds) {
  std::vector<double> x(folds.size());
  std::iota(x.begin(), x.end(), 0.0);
  const std::string first = "fold 0", last = "fold " + std::to_string(folds.size() - 1);
  SvgChart ic(560, 240, "Information coefficient of the median, first step");
  ic.bars(x, per_fold(folds, "/desk/ic_pooled/0/ic"), 0.7, kBlue, "pooled");
  ic.line(x, per_fold(folds, "/desk/ic_across_series/0/ic"), kOrange, "across series");
  ic.include_y(0.0);
  ic.x_labels(first, last);
  SvgChart coverage(560, 240, "Coverage of the central interval");
  coverage.line(x, per_fold(folds, "/desk/interval_coverage"), kGreen, "raw", 2.0);
  // A walk with conformal quantiles: theirs beside the model's own.
  if (folds.at(0).contains("conformal")) {
    coverage.line(x, per_fold(folds, "/conformal/conformal/interval_coverage"), kOrange,
                  folds.at(0).at("conformal").value("method", "adaptive") + " conformal", 2.0);
  }
  const double nominal = number_at(folds.at(0), Json::json_pointer("/desk/interval_nominal"));
  if (std::isfinite(nominal)) coverage.horizontal_rule(nominal, kGrey, "nominal");
  coverage.x_labels(first, last);
  SvgChart loss(560, 240, "Quantile loss out of sample (scaled)");
  loss.line(x, per_fold(folds, "/metrics/loss"), kBlue, "loss", 2.0);
  loss.x_labels(first, last);
  return "<div class=\"row\">" + ic.svg() + coverage.svg() + loss.svg() + "</div>\n";
}

std::string training_curves_or_none(const std::vector<Json>& curves, size_t folds) {
  for (const auto& c : curves) {
    if (!c.empty()) {
      return detail::training_curves(curves, "Training curves, fold after fold (one point per epoch)",
                                     "fold 0, epoch 1", "fold " + std::to_string(folds - 1) + ", last epoch");
    }
  }
  return "<p>No fold trained (every model was the first fold's).</p>\n";
}

}  // namespace

std::string backtest_report_html(const fs::path& folder, const ReportOptions& options) {
  const Json doc = read_record(folder);
  const auto& folds = doc.at("folds");
  if (folds.empty()) throw UsageError(folder.string() + ": the backtest recorded no fold");
  const auto forecasts = data::read_backtest_forecasts((folder / "forecasts.parquet").string());
  const auto series = detail::choose_series(forecasts, options.series, folder.string());
  const std::string title =
      options.title.empty() ? "Walk-forward backtest: " + folder.filename().string() : options.title;

  std::string fans;
  for (const auto& s : series) fans += detail::fan_chart(forecasts, s, options.fan_step, options.fan_bars);
  const auto& last = folds.back();
  std::vector<Json> curves;
  for (const auto& f : folds) curves.push_back(f.at("training").at("curve"));
  std::string body;
  body += section("The walk forward", options_table(doc.at("options")) + summary_table(doc.at("summary")));
  body += section("Across folds", across_folds_charts(folds));
  body += section("Folds", fold_table(folds));
  body += section("Forecasts against what happened", fans);
  body += section(
      "What the model looks at",
      last.contains("explanation")
          ? detail::explanation_charts(last.at("explanation"),
                                       "The last fold's model over its " + last.at("explanation").at("windows").dump() +
                                           " windows: each selector's mean weights (the 15 heaviest), "
                                           "and the decoder's attention to each position.")
          : "<p>The folds record no explanation.</p>\n");
  body += section("Training", training_curves_or_none(curves, folds.size()));
  return detail::report_page(title,
                             "Figures in the target's units (a one-bar log return unless the model declared another "
                             "target); every forecast is out of sample: made by the model of its fold from bars "
                             "through the fold's date.",
                             body);
}

void write_backtest_report(const fs::path& folder, const ReportOptions& options, const fs::path& output) {
  io::write_file_atomically(output, backtest_report_html(folder, options));
}

}  // namespace qtft::infer
