#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qtft::data {

// Forecasts in original units, one row per window and horizon step, ready to write.
struct ForecastTable {
  std::vector<double> quantiles;      // e.g. 0.1, 0.5, 0.9
  std::vector<int64_t> timestamp_ns;  // the forecast bar's time
  std::vector<int64_t> origin_ns;     // the last encoder bar's time (when it was made)
  std::vector<std::string> symbol;
  std::vector<int32_t> step;                         // 1..horizon
  std::vector<double> origin_close;                  // the last known close
  std::vector<double> actual_return;                 // the realized one-bar log return (backtests only)
  bool has_actual = true;                            // false for forecasts of bars that have not happened
  std::vector<std::vector<double>> quantile_return;  // [quantile][row] one-bar log return
  std::vector<std::vector<double>> quantile_price;   // [quantile][row] implied close
  size_t rows() const { return timestamp_ns.size(); }
};

// Writes .csv or .parquet (by extension), atomically. Columns: timestamp, origin, symbol,
// step, origin_close, actual_return (when has_actual), return_q<q>..., price_q<q>...
void write_forecast_table(const ForecastTable& table, const std::string& path);

}  // namespace qtft::data
