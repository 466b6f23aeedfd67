#pragma once

// What the two reports (a backtest's folder, a model on data) draw alike: the page and its
// style, tables' cells, fan charts of forecasts against what happened, the interpretation's
// charts and training curves.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qtft/data/bars/backtest_forecasts.h"

namespace qtft::infer::detail {

// A number at `path` in `j`, NaN when absent or not a number.
double number_at(const nlohmann::json& j, const nlohmann::json::json_pointer& path);
// A table cell's text: "n/a" for NaN.
std::string cell(double v, const char* format = "%.4f");
std::string section(const std::string& title, const std::string& body);

// The series to draw: `requested` (each must have forecasts, else UsageError naming
// --series, `where` and the series there are), or the first two of the forecasts.
std::vector<std::string> choose_series(const data::BacktestForecasts& forecasts,
                                       const std::vector<std::string>& requested, const std::string& where);

// The forecasts of one series at one horizon step, the last `bars` of them: the outer
// quantiles as a band, the median, and the realized values. Throws UsageError naming
// --fan-bars or --fan-step for fewer than one bar or a step the forecasts do not have.
std::string fan_chart(const data::BacktestForecasts& forecasts, const std::string& series, int32_t step, int64_t bars);

// eval::to_json(Explanation)'s object as charts: each selector's heaviest inputs and the
// attention by position, after the paragraph `lead`.
std::string explanation_charts(const nlohmann::json& explanation, const std::string& lead);

// Training curves, one point per epoch of each run in `runs` (arrays of TrainingState
// history entries), one run after another.
std::string training_curves(const std::vector<nlohmann::json>& runs, const std::string& title,
                            const std::string& first_label, const std::string& last_label);

// The page: its title, an introduction, the body, the style, and a script that counts the
// charts the browser laid out into the body's data-charts-rendered beside data-charts (how
// many the page holds), for a headless browser's test.
std::string report_page(const std::string& title, const std::string& introduction, const std::string& body);

}  // namespace qtft::infer::detail
