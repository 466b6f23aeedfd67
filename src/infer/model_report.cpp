// A model on data as a report page (model_report.h): one pass for the rows, the figures and
// the explanation, then the page from the parts the backtest's report draws as well.
#include "qtft/infer/model_report.h"

#include <cmath>
#include <cstdio>

#include "qtft/common/format.h"
#include "qtft/eval/evaluate.h"
#include "qtft/eval/forecast_rows.h"
#include "qtft/infer/detail/report_page.h"
#include "qtft/infer/detail/svg_chart.h"

namespace qtft::infer {
namespace {

using detail::cell;
using detail::escape_html;
using detail::section;
using detail::SvgChart;
using Json = nlohmann::json;

std::string figures_table(const ModelReport& r) {
  std::string rows;
  const auto row = [&](const std::string& name, const std::string& value) {
    rows += "<tr><th>" + escape_html(name) + "</th><td>" + escape_html(value) + "</td></tr>\n";
  };
  const auto& d = r.desk;
  const auto ic = d.ic_pooled.empty() ? eval::InformationCoefficient{NAN, NAN, 0} : d.ic_pooled.front();
  row("model", r.model);
  row("data", r.data);
  row("windows", r.split + ": " + std::to_string(d.windows));
  row("quantile loss (scaled)", cell(r.metrics.loss));
  row("quantile loss (target units)", cell(r.metrics.in_target_units.loss, "%.4g"));
  row("central interval coverage",
      cell(d.interval_coverage, "%.3f") + " (nominal " + cell(d.interval_nominal, "%.3f") + ")");
  row("IC of the median, first step", cell(ic.ic) + " (t " + cell(ic.t, "%.2f") + ")");
  row("sign hit rate", cell(d.hit_rate, "%.3f"));
  row("position after " + format_number(d.cost_bps) + " bps",
      "mean " + cell(d.position.mean_return, "%.3g") + " per bar, Sharpe " + cell(d.position.sharpe, "%.2f") +
          ", turnover " + cell(d.position.turnover, "%.3f") + ", max drawdown " +
          cell(d.position.max_drawdown, "%.3g"));
  return "<table class=\"options\">" + rows + "</table>\n";
}

std::string calibration_charts(const eval::DeskMetrics& d) {
  std::vector<double> x, realized, nominal;
  for (size_t k = 0; k < d.quantiles.size(); ++k) {
    x.push_back(static_cast<double>(k));
    realized.push_back(d.coverage[k]);
    nominal.push_back(d.quantiles[k]);
  }
  SvgChart coverage(560, 240, "Coverage of each quantile");
  coverage.bars(x, realized, 0.6, "#2ca02c", "realized");
  coverage.line(x, nominal, "#7f7f7f", "nominal", 1.5, true);
  coverage.include_y(0.0);
  coverage.include_y(1.0);
  if (!x.empty()) {
    coverage.x_labels("q" + format_number(d.quantiles.front()), "q" + format_number(d.quantiles.back()));
  }
  std::vector<double> steps, ic;
  for (size_t h = 0; h < d.ic_pooled.size(); ++h) {
    steps.push_back(static_cast<double>(h + 1));
    ic.push_back(d.ic_pooled[h].ic);
  }
  SvgChart ranking(560, 240, "Information coefficient of the median by horizon step");
  ranking.bars(steps, ic, 0.7, "#1f77b4", "pooled");
  ranking.include_y(0.0);
  if (!steps.empty()) ranking.x_labels("step 1", "step " + std::to_string(steps.size()));
  return "<div class=\"row\">" + coverage.svg() + ranking.svg() + "</div>\n";
}

}  // namespace

ModelReport score_model_for_report(artifact::LoadedModel& model, const std::string& model_file,
                                   const data::Dataset& dataset, data::Split split, const std::string& data,
                                   size_t batch_size, c10::Device device, double cost_bps) {
  const auto& options = model.model->options();
  eval::ForecastRows rows(dataset, 0, options.quantiles());
  eval::ExplanationAccumulator explanation(dataset.schema(), dataset.options());
  const auto evaluation = eval::evaluate_for_desk(model.model, dataset, split, batch_size, device, cost_bps,
                                                  [&](const data::Batch& batch, const model::TftOutput& out) {
                                                    rows.add(batch, out);
                                                    explanation.add(out);
                                                  });
  ModelReport report;
  report.model = model_file;
  report.data = data;
  report.split = data::split_name(split);
  report.metrics = evaluation.metrics;
  report.desk = evaluation.desk;
  report.symbols = dataset.schema().symbols;
  report.explanation = explanation.result();
  report.forecasts = rows.take();
  if (model.file.training) report.training_curve = model.file.training->history;
  return report;
}

std::string model_report_html(const ModelReport& r, const ReportOptions& options) {
  const auto series = detail::choose_series(r.forecasts, options.series, r.model + " on " + r.data);
  const std::string title = options.title.empty() ? "Model report: " + r.model : options.title;
  std::string fans;
  for (const auto& s : series) fans += detail::fan_chart(r.forecasts, s, options.fan_step, options.fan_bars);
  const auto epochs = r.training_curve.size();
  std::string body;
  body += section("The model on the data", figures_table(r));
  body += section("Calibration and ranking", calibration_charts(r.desk));
  body += section("Forecasts against what happened", fans);
  body += section("What the model looks at",
                  detail::explanation_charts(eval::to_json(r.explanation),
                                             "Over the " + std::to_string(r.explanation.windows) +
                                                 " windows: each selector's mean weights (the 15 heaviest), and "
                                                 "the decoder's attention to each position."));
  body += section("Training", epochs == 0
                                  ? std::string("<p>The file records no training history.</p>\n")
                                  : detail::training_curves({r.training_curve}, "Training curve (one point per epoch)",
                                                            "epoch 1", "epoch " + std::to_string(epochs)));
  return detail::report_page(title,
                             "Figures in the target's units (a one-bar log return unless the model declared another "
                             "target), over the " +
                                 r.split +
                                 " windows of the data: forecasts of bars the model trained on are in sample.",
                             body);
}

}  // namespace qtft::infer
