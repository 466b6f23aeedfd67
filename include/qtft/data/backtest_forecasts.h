#pragma once

// A walk-forward backtest's forecasts as a table: forecasts.parquet, and the per-fold parts
// a backtest keeps until it ends (so that a resumed one keeps the folds it had finished).

#include <cstdint>
#include <string>
#include <vector>

namespace qtft::data {

// One row per window and horizon step, in the target's units (the transformed target: a
// one-bar log return by default). Columns: fold, symbol, origin (the last encoder bar's
// time), timestamp (the forecast bar's), step (1..horizon), q<level> per quantile, realized.
struct BacktestForecasts {
  std::vector<double> quantiles;
  std::vector<int32_t> fold;
  std::vector<std::string> symbol;
  std::vector<int64_t> origin_ns, timestamp_ns;
  std::vector<int32_t> step;
  std::vector<std::vector<double>> value;  // [quantile][row]
  std::vector<double> realized;
  size_t rows() const { return fold.size(); }
};

// The column name of a quantile level: "q0.1".
std::string quantile_column(double level);

// Writes the table as Parquet, atomically.
void write_backtest_forecasts(const BacktestForecasts& forecasts, const std::string& path);
// Reads a table write_backtest_forecasts wrote; throws qtft::Error naming the file and the
// column when it lacks one or holds another type.
BacktestForecasts read_backtest_forecasts(const std::string& path);
// The rows of `parts` in order, as one Parquet file at `path`, atomically; each part is read
// in turn, so memory follows the whole table once (Arrow's), not twice.
void concatenate_backtest_forecasts(const std::vector<std::string>& parts, const std::string& path);

}  // namespace qtft::data
