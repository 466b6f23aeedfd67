#pragma once

// Forecasts as the rows of data::BacktestForecasts (a backtest fold's, a model report's):
// per window and horizon step its series, origin, forecast bar, quantiles and realized value,
// in the target's units. Collected batch by batch from a walk that does more with them.

#include <cstdint>
#include <vector>

#include "qtft/data/bars/backtest_forecasts.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

class ForecastRows {
 public:
  // Every row is numbered `fold`. With `conformal`, every add() brings the quantiles as
  // issued with conformal offsets too.
  ForecastRows(const data::Dataset& dataset, int32_t fold, std::vector<double> quantiles, bool conformal = false);
  // `issued`: the batch's quantiles as issued with conformal offsets, [windows, horizon,
  // levels] row-major in the model's scaled units (as the conformal walks give them).
  void add(const data::Batch& batch, const model::TftOutput& out, const double* issued = nullptr);
  const data::BacktestForecasts& rows() const { return rows_; }
  // The rows collected since the last take(); collecting goes on from none.
  data::BacktestForecasts take();

 private:
  const data::Dataset& dataset_;
  int32_t fold_ = 0;
  data::BacktestForecasts rows_;
};

}  // namespace qtft::eval
