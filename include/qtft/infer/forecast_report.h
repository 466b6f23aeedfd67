#pragma once

// Forecaster results as people and programs read them: a text table, a file table (CSV or
// Parquet through data::write_forecast_table) and JSON. qtft forecast prints with these,
// so an embedding program that prints with them shows exactly what the CLI shows.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "qtft/data/bars/forecast_table.h"
#include "qtft/infer/forecaster.h"

namespace qtft::infer {

// One block per series: a heading (symbol, last bar, how the future timestamps were
// chosen) and a row per step with the quantile returns and prices.
std::string format_forecasts(const std::vector<Forecast>& forecasts);
// One row per series and step; no actual_return column (those bars have not happened).
data::ForecastTable forecast_table(const std::vector<Forecast>& forecasts);
// {"symbol", "origin", "origin_close", "quantiles", "timestamps_continued", "bar_interval_seconds",
//  "steps": [{"step", "timestamp", "return": [...], "price": [...]}]}
nlohmann::json to_json(const Forecast& forecast);
nlohmann::json to_json(const std::vector<Forecast>& forecasts);

}  // namespace qtft::infer
