// The parts both reports draw alike (detail/report_page.h).
#include "qtft/infer/detail/report_page.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/infer/detail/svg_chart.h"

namespace qtft::infer::detail {
namespace {

using Json = nlohmann::json;

std::vector<std::pair<std::string, double>> weights_of(const Json& weights, size_t top) {
  std::vector<std::pair<std::string, double>> rows;
  for (const auto& [name, w] : weights.items()) rows.emplace_back(name, w.get<double>());
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (rows.size() > top) rows.resize(top);
  return rows;
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

double number_at(const Json& j, const Json::json_pointer& path) {
  if (!j.contains(path)) return NAN;
  const auto& v = j.at(path);
  return v.is_number() ? v.get<double>() : NAN;
}

std::string cell(double v, const char* format) {
  if (!std::isfinite(v)) return "n/a";
  char buf[40];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string section(const std::string& title, const std::string& body) {
  return "<section><h2>" + escape_html(title) + "</h2>\n" + body + "</section>\n";
}

std::vector<std::string> choose_series(const data::BacktestForecasts& forecasts,
                                       const std::vector<std::string>& requested, const std::string& where) {
  std::vector<std::string> present;
  for (const auto& s : forecasts.symbol) {
    if (std::find(present.begin(), present.end(), s) == present.end()) present.push_back(s);
  }
  for (const auto& s : requested) {
    if (std::find(present.begin(), present.end(), s) == present.end()) {
      throw UsageError("--series " + s + ": no forecasts of it in " + where + " (it has " + join_names(present) + ")");
    }
  }
  if (!requested.empty()) return requested;
  return {present.begin(), present.begin() + std::min<std::ptrdiff_t>(2, static_cast<std::ptrdiff_t>(present.size()))};
}

// The forecasts of one series at one step, the last `bars` of them, as a fan.
std::string fan_chart(const data::BacktestForecasts& f, const std::string& series, int32_t step, int64_t bars) {
  if (bars < 1) throw UsageError("--fan-bars " + std::to_string(bars) + ": must be at least 1");
  const int32_t steps = f.step.empty() ? 0 : *std::max_element(f.step.begin(), f.step.end());
  if (step < 1 || step > steps) {
    throw UsageError("--fan-step " + std::to_string(step) + ": the forecasts have steps 1 to " + std::to_string(steps));
  }
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

std::string explanation_charts(const Json& e, const std::string& lead) {
  std::string out = "<p>" + escape_html(lead) + "</p>\n<div class=\"row\">";
  out += horizontal_bars_svg(weights_of(e.at("encoder_weights"), 15), "Past inputs (encoder)", kBlue);
  out += horizontal_bars_svg(weights_of(e.at("decoder_weights"), 15), "Known future inputs (decoder)", kGreen);
  out += horizontal_bars_svg(weights_of(e.at("static_weights"), 15), "Static inputs", kOrange);
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

std::string training_curves(const std::vector<Json>& runs, const std::string& title, const std::string& first_label,
                            const std::string& last_label) {
  std::vector<double> x, train, val;
  double epoch = 0;
  for (const auto& run : runs) {
    for (const auto& e : run) {
      x.push_back(epoch++);
      train.push_back(e.value("train_loss", NAN));
      val.push_back(e.contains("val_loss") && e.at("val_loss").is_number() ? e.at("val_loss").get<double>() : NAN);
    }
  }
  if (x.empty()) return "<p>No training recorded.</p>\n";
  SvgChart chart(1120, 260, title);
  chart.line(x, train, kOrange, "training loss");
  chart.line(x, val, kBlue, "validation loss");
  chart.x_labels(first_label, last_label);
  return chart.svg();
}

std::string report_page(const std::string& title, const std::string& introduction, const std::string& body) {
  size_t charts = 0;
  const std::string mark = "<svg class=\"chart\"";
  for (size_t at = body.find(mark); at != std::string::npos; at = body.find(mark, at + 1)) ++charts;
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + escape_html(title) +
         "</title>\n<style>" + kStyle + "</style></head>\n<body data-charts=\"" + std::to_string(charts) + "\">\n<h1>" +
         escape_html(title) + "</h1>\n<p>" + escape_html(introduction) + "</p>\n" + body + kSelfCheck +
         "</body></html>\n";
}

}  // namespace qtft::infer::detail
