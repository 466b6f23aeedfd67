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
#include "qtft/data/backtest_forecasts.h"
#include "qtft/infer/detail/svg_chart.h"
#include "qtft/io/atomic_file.h"
#include "qtft/train/backtest.h"

namespace qtft::infer {
namespace {

using detail::escape_html;
using detail::SvgChart;
namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kBlue = "#1f77b4";
constexpr const char* kOrange = "#ff7f0e";
constexpr const char* kGreen = "#2ca02c";
constexpr const char* kGrey = "#7f7f7f";

double number_at(const Json& j, const Json::json_pointer& path) {
  if (!j.contains(path)) return NAN;
  const auto& v = j.at(path);
  return v.is_number() ? v.get<double>() : NAN;
}

std::string cell(double v, const char* format = "%.4f") {
  if (!std::isfinite(v)) return "n/a";
  char buf[40];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

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

std::string section(const std::string& title, const std::string& body) {
  return "<section><h2>" + escape_html(title) + "</h2>\n" + body + "</section>\n";
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
  row("windows", o.at("windows").dump());
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
  coverage.line(x, per_fold(folds, "/desk/interval_coverage"), kGreen, "realized", 2.0);
  const double nominal = number_at(folds.at(0), Json::json_pointer("/desk/interval_nominal"));
  if (std::isfinite(nominal)) coverage.horizontal_rule(nominal, kGrey, "calibrated");
  coverage.x_labels(first, last);
  SvgChart loss(560, 240, "Quantile loss out of sample (scaled)");
  loss.line(x, per_fold(folds, "/metrics/loss"), kBlue, "loss", 2.0);
  loss.x_labels(first, last);
  return "<div class=\"row\">" + ic.svg() + coverage.svg() + loss.svg() + "</div>\n";
}

// The forecasts of one series at one step, the last `bars` of them, as a fan.
std::string fan_chart(const data::BacktestForecasts& f, const std::string& series, int32_t step, int64_t bars) {
  std::vector<size_t> rows;
  for (size_t i = 0; i < f.rows(); ++i) {
    if (f.symbol[i] == series && f.step[i] == step) rows.push_back(i);
  }
  std::stable_sort(rows.begin(), rows.end(), [&](size_t a, size_t b) { return f.timestamp_ns[a] < f.timestamp_ns[b]; });
  if (static_cast<int64_t>(rows.size()) > bars) rows.erase(rows.begin(), rows.end() - bars);
  const auto median =
      std::find_if(f.quantiles.begin(), f.quantiles.end(), [](double q) { return std::abs(q - 0.5) < 1e-9; }) -
      f.quantiles.begin();
  std::vector<double> x, low, high, mid, realized;
  for (size_t k = 0; k < rows.size(); ++k) {
    x.push_back(static_cast<double>(k));
    low.push_back(f.value.front()[rows[k]]);
    high.push_back(f.value.back()[rows[k]]);
    mid.push_back(f.value[static_cast<size_t>(median)][rows[k]]);
    realized.push_back(f.realized[rows[k]]);
  }
  SvgChart chart(1120, 300,
                 series + ": step " + std::to_string(step) + " forecasts against what happened (last " +
                     std::to_string(rows.size()) + " bars)");
  chart.band(x, low, high, kBlue,
             "q" + format_number(f.quantiles.front()) + " to q" + format_number(f.quantiles.back()));
  chart.line(x, mid, kBlue, "median", 1.5);
  chart.line(x, realized, "#222", "realized", 1.0);
  if (!rows.empty()) chart.x_labels(format_utc(f.timestamp_ns[rows.front()]), format_utc(f.timestamp_ns[rows.back()]));
  chart.y_label("target units");
  return chart.svg();
}

std::vector<std::pair<std::string, double>> weights_of(const Json& weights, size_t top) {
  std::vector<std::pair<std::string, double>> rows;
  for (const auto& [name, w] : weights.items()) rows.emplace_back(name, w.get<double>());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

std::string interpretation(const Json& last_fold) {
  if (!last_fold.contains("explanation")) return "<p>The folds record no explanation.</p>\n";
  const auto& e = last_fold.at("explanation");
  std::string out = "<p>The last fold's model over its " + e.at("windows").dump() +
                    " windows: each selector's mean weights (the 15 heaviest), and the decoder's attention to each "
                    "position.</p>\n<div class=\"row\">";
  out += detail::horizontal_bars_svg(weights_of(e.at("encoder_weights"), 15), "Past inputs (encoder)", kBlue);
  out += detail::horizontal_bars_svg(weights_of(e.at("decoder_weights"), 15), "Known future inputs (decoder)", kGreen);
  out += detail::horizontal_bars_svg(weights_of(e.at("static_weights"), 15), "Static inputs", kOrange);
  std::vector<double> x, y;
  for (const auto& p : e.at("attention")) {
    x.push_back(p.at("position").get<double>());
    y.push_back(p.at("weight").get<double>());
  }
  SvgChart attention(560, 240, "Attention by position (negative: encoder bars)");
  attention.bars(x, y, 0.8, kBlue, "weight");
  if (!x.empty()) attention.x_labels(format_number(x.front()), format_number(x.back()));
  return out + attention.svg() + "</div>\n";
}

std::string training_curves(const Json& folds) {
  std::vector<double> x, train, val;
  double epoch = 0;
  for (const auto& f : folds) {
    for (const auto& e : f.at("training").at("curve")) {
      x.push_back(epoch++);
      train.push_back(e.value("train_loss", NAN));
      val.push_back(e.contains("val_loss") && e.at("val_loss").is_number() ? e.at("val_loss").get<double>() : NAN);
    }
  }
  if (x.empty()) return "<p>No fold trained (every model was the first fold's).</p>\n";
  SvgChart chart(1120, 260, "Training curves, fold after fold (one point per epoch)");
  chart.line(x, train, kOrange, "training loss");
  chart.line(x, val, kBlue, "validation loss");
  chart.x_labels("fold 0, epoch 1", "fold " + std::to_string(folds.size() - 1) + ", last epoch");
  return chart.svg();
}

constexpr const char* kStyle = R"(body{font-family:sans-serif;margin:24px;color:#222;max-width:1180px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right;font-size:13px}
th{background:#f4f4f4}table.options th{text-align:left}.row{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{background:#fff;border:1px solid #eee}svg text{font-size:11px;fill:#333}svg text.title{font-size:13px;font-weight:bold}
)";

// Counts the charts that the browser laid out with something drawn, into the body's
// data-charts-rendered (what a headless browser's test reads); the page needs no script.
constexpr const char* kSelfCheck = R"(<script>
(function(){var n=0;document.querySelectorAll('svg.chart').forEach(function(s){
var b=s.getBoundingClientRect();if(b.width>0&&b.height>0&&s.querySelector('.series'))n++;});
document.body.setAttribute('data-charts-rendered',String(n));})();
</script>
)";

}  // namespace

std::string backtest_report_html(const fs::path& folder, const ReportOptions& options) {
  const Json doc = read_record(folder);
  const auto& folds = doc.at("folds");
  if (folds.empty()) throw UsageError(folder.string() + ": the backtest recorded no fold");
  const auto forecasts = data::read_backtest_forecasts((folder / "forecasts.parquet").string());
  std::vector<std::string> present;
  for (const auto& s : forecasts.symbol) {
    if (std::find(present.begin(), present.end(), s) == present.end()) present.push_back(s);
  }
  std::vector<std::string> series = options.series;
  for (const auto& s : series) {
    if (std::find(present.begin(), present.end(), s) == present.end()) {
      throw UsageError("--series " + s + ": no forecasts of it in " + folder.string() + " (it has " +
                       join_names(present) + ")");
    }
  }
  if (series.empty()) series.assign(present.begin(), present.begin() + std::min<ptrdiff_t>(2, present.size()));
  const std::string title =
      options.title.empty() ? "Walk-forward backtest: " + folder.filename().string() : options.title;

  std::string fans;
  for (const auto& s : series) fans += fan_chart(forecasts, s, options.fan_step, options.fan_bars);
  const size_t charts = 3 + series.size() + 4 + 1;
  std::string body;
  body += section("The walk forward", options_table(doc.at("options")) + summary_table(doc.at("summary")));
  body += section("Across folds", across_folds_charts(folds));
  body += section("Folds", fold_table(folds));
  body += section("Forecasts against what happened", fans);
  body += section("What the model looks at", interpretation(folds.back()));
  body += section("Training", training_curves(folds));
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape_html(title) +
         "</title>\n<style>" + kStyle + "</style></head>\n<body data-charts=\"" + std::to_string(charts) + "\">\n<h1>" +
         escape_html(title) +
         "</h1>\n<p>Figures in the target's units (a one-bar log return unless "
         "the model declared another target); every forecast is out of sample: made by the model of its fold from "
         "bars through the fold's date.</p>\n" +
         body + kSelfCheck + "</body></html>\n";
}

void write_backtest_report(const fs::path& folder, const ReportOptions& options, const fs::path& output) {
  io::write_file_atomically(output, backtest_report_html(folder, options));
}

}  // namespace qtft::infer
