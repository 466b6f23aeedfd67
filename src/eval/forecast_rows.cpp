#include "qtft/eval/forecast_rows.h"

#include "qtft/common/error.h"
#include "qtft/eval/window_units.h"

namespace qtft::eval {

ForecastRows::ForecastRows(const data::Dataset& dataset, int32_t fold, std::vector<double> quantiles, bool conformal)
    : dataset_(dataset), fold_(fold) {
  rows_.quantiles = std::move(quantiles);
  rows_.value.resize(rows_.quantiles.size());
  if (conformal) rows_.conformal.resize(rows_.quantiles.size());
}

data::BacktestForecasts ForecastRows::take() {
  data::BacktestForecasts taken = std::move(rows_);
  rows_ = data::BacktestForecasts{};
  rows_.quantiles = taken.quantiles;
  rows_.value.resize(rows_.quantiles.size());
  rows_.conformal.resize(taken.conformal.size());
  return taken;
}

void ForecastRows::add(const data::Batch& batch, const model::TftOutput& out, const double* issued) {
  const bool conformal = !rows_.conformal.empty();
  if (conformal != (issued != nullptr)) {
    throw Error(std::string("forecast rows: conformal quantiles ") + (conformal ? "missing" : "not expected"));
  }
  const auto units = target_units_of(dataset_, batch.windows);
  const auto forecast = out.quantiles.to(at::kCPU, at::kDouble).contiguous();
  const auto target = batch.target.to(at::kDouble).contiguous();
  const int64_t horizon = forecast.size(1), q_count = forecast.size(2);
  const double* f = forecast.data_ptr<double>();
  const double* y = target.data_ptr<double>();
  const auto encoder = static_cast<size_t>(dataset_.options().encoder_length);
  for (size_t b = 0; b < batch.windows.size(); ++b) {
    const auto& window = batch.windows[b];
    const auto& series = dataset_.series()[window.series];
    const size_t origin = window.start + encoder - 1;
    for (int64_t h = 0; h < horizon; ++h) {
      rows_.fold.push_back(fold_);
      rows_.symbol.push_back(series.symbol);
      rows_.origin_ns.push_back(series.timestamp_ns[origin]);
      rows_.timestamp_ns.push_back(series.timestamp_ns[origin + 1 + static_cast<size_t>(h)]);
      rows_.step.push_back(static_cast<int32_t>(h + 1));
      const int64_t at = static_cast<int64_t>(b) * horizon + h;
      for (int64_t q = 0; q < q_count; ++q) {
        rows_.value[static_cast<size_t>(q)].push_back(f[at * q_count + q] * units.scale[b] + units.center[b]);
        if (issued) {
          rows_.conformal[static_cast<size_t>(q)].push_back(issued[at * q_count + q] * units.scale[b] +
                                                            units.center[b]);
        }
      }
      rows_.realized.push_back(y[at] * units.scale[b] + units.center[b]);
    }
  }
}

}  // namespace qtft::eval
