#pragma once

// A walk-forward backtest's forecasts as a table: forecasts.parquet, and the per-fold parts
// a backtest keeps until it ends (so that a resumed one keeps the folds it had finished).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qtft::data {

// One row per window and horizon step, in the target's units (the transformed target: a
// one-bar log return by default). Columns: fold, symbol, origin (the last encoder bar's
// time), timestamp (the forecast bar's), step (1..horizon), q<level> per quantile, realized;
// under a conformal method, q<level>_conformal per quantile after realized: the quantiles
// as issued with the offsets in force at the origin (crossing ones sorted).
struct BacktestForecasts {
  std::vector<double> quantiles;
  std::vector<int32_t> fold;
  std::vector<std::string> symbol;
  std::vector<int64_t> origin_ns, timestamp_ns;
  std::vector<int32_t> step;
  std::vector<std::vector<double>> value;  // [quantile][row], the model's own
  std::vector<double> realized;
  std::vector<std::vector<double>> conformal;  // [quantile][row] as issued; empty without a method
  size_t rows() const { return fold.size(); }
};

// The column names of a quantile level: "q0.1", and as issued with conformal offsets,
// "q0.1_conformal".
std::string quantile_column(double level);
std::string conformal_column(double level);

// Writes the table as Parquet, atomically.
void write_backtest_forecasts(const BacktestForecasts& forecasts, const std::string& path);
// The same a part of the rows at a time, so that memory follows a part and not the table
// (a fold's forecasts over a hundred series are millions of rows). The file appears at
// `path` on commit(), or not at all.
class BacktestForecastWriter {
 public:
  // `conformal`: the file has the conformal columns, and every write() brings them.
  BacktestForecastWriter(const std::string& path, const std::vector<double>& quantiles, bool conformal = false);
  ~BacktestForecastWriter();
  BacktestForecastWriter(const BacktestForecastWriter&) = delete;
  BacktestForecastWriter& operator=(const BacktestForecastWriter&) = delete;
  // Appends `rows` (of the writer's quantiles).
  void write(const BacktestForecasts& rows);
  void commit();

 private:
  struct State;
  std::unique_ptr<State> state_;
  std::string path_;
  std::vector<double> quantiles_;
  bool conformal_ = false;
};
// Reads a table write_backtest_forecasts wrote; throws qtft::Error naming the file and the
// column when it lacks one or holds another type.
BacktestForecasts read_backtest_forecasts(const std::string& path);
// Whether the table at `path` has the conformal columns (a part an older qtft wrote has none).
bool backtest_forecasts_have_conformal(const std::string& path);
// The rows of `parts` in order, as one Parquet file at `path`, atomically; read and written a
// batch of rows at a time, so memory does not follow the parts' size. Throws qtft::Error
// naming the part whose columns are not the first part's.
void concatenate_backtest_forecasts(const std::vector<std::string>& parts, const std::string& path);

}  // namespace qtft::data
