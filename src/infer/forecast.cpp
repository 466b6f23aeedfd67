#include "qtft/infer/forecast.h"

#include <cmath>

#include "qtft/eval/evaluate.h"

namespace qtft::infer {

TargetUnits target_units(const data::InputSchema& spec, int64_t symbol_id) {
  const auto scaling = data::target_scaling_of(spec, symbol_id);
  return {spec.target().transform, scaling.center, scaling.scale};
}

void to_original_units(const double* scaled, int64_t horizon, int64_t nq, int64_t median, const TargetUnits& units,
                       double origin_close, double* returns, double* prices) {
  auto unscale = [&](double v) {
    const double t = v * units.scale;
    return units.center == 0.0 ? t : t + units.center;  // today's log returns, bitwise
  };
  double median_path = 0.0;
  for (int64_t step = 0; step < horizon; ++step) {
    for (int64_t k = 0; k < nq; ++k) {
      const double r = unscale(scaled[step * nq + k]);
      returns[step * nq + k] = r;
      switch (units.transform) {
        case data::TargetTransform::LogReturn: prices[step * nq + k] = origin_close * std::exp(median_path + r); break;
        case data::TargetTransform::None: prices[step * nq + k] = r; break;
        case data::TargetTransform::Log: prices[step * nq + k] = std::exp(r); break;
        case data::TargetTransform::Log1p: prices[step * nq + k] = std::expm1(r); break;
      }
    }
    median_path += unscale(scaled[step * nq + median]);
  }
}

ForecastTableBuilder::ForecastTableBuilder(const data::Dataset& dataset, std::vector<double> quantiles, int64_t median)
    : dataset_(dataset), median_(median) {
  table_.quantile_return.resize(quantiles.size());
  table_.quantile_price.resize(quantiles.size());
  table_.quantiles = std::move(quantiles);
}

void ForecastTableBuilder::add(const data::Batch& batch, const model::TftOutput& out) {
  const int64_t l = dataset_.options().encoder_length, h = dataset_.options().horizon;
  auto q = out.quantiles.to(at::kCPU).to(at::kDouble).contiguous();
  const double* f = q.data_ptr<double>();
  const auto nq = static_cast<int64_t>(table_.quantiles.size());
  std::vector<double> returns(static_cast<size_t>(h * nq)), prices(static_cast<size_t>(h * nq));
  for (int64_t i = 0; i < batch.size(); ++i) {
    const auto& w = batch.windows[static_cast<size_t>(i)];
    const auto& s = dataset_.series()[w.series];
    const int64_t origin = w.start + l - 1;
    const auto units = target_units(dataset_.schema(), s.symbol_id);
    to_original_units(f + i * h * nq, h, nq, median_, units, s.close[origin], returns.data(), prices.data());
    for (int64_t step = 0; step < h; ++step) {
      const int64_t row = origin + 1 + step;
      table_.timestamp_ns.push_back(s.timestamp_ns[row]);
      table_.origin_ns.push_back(s.timestamp_ns[origin]);
      table_.symbol.push_back(s.symbol);
      table_.step.push_back(static_cast<int32_t>(step + 1));
      table_.origin_close.push_back(s.close[origin]);
      const double actual = static_cast<double>(s.target[row]) * units.scale;
      table_.actual_return.push_back(units.center == 0.0 ? actual : actual + units.center);
      for (int64_t k = 0; k < nq; ++k) {
        table_.quantile_return[k].push_back(returns[step * nq + k]);
        table_.quantile_price[k].push_back(prices[step * nq + k]);
      }
    }
  }
}

data::ForecastTable forecast_split(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                   data::Split split, size_t batch_size, c10::Device device) {
  const auto& opts = model->options();
  ForecastTableBuilder builder(dataset, opts.quantiles(), opts.median_index());
  eval::for_each_forecast(model, dataset, split, batch_size, device,
                          [&](const data::Batch& batch, const model::TftOutput& out) { builder.add(batch, out); });
  return builder.take();
}

}  // namespace qtft::infer
