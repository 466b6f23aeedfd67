#include "qtft/train/forecast.h"

#include <cmath>

#include "qtft/train/evaluate.h"

namespace qtft::train {

data::ForecastTable forecast_split(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                   data::Split split, size_t batch_size, c10::Device device) {
  const auto& opts = model->options();
  const auto& quantiles = opts.quantiles();
  const int64_t median = opts.median_index();
  const int64_t l = dataset.options().encoder_length, h = dataset.options().horizon;
  const double scale = dataset.spec().target_scale;
  data::ForecastTable table;
  table.quantiles = quantiles;
  table.quantile_return.resize(quantiles.size());
  table.quantile_price.resize(quantiles.size());
  for_each_forecast(model, dataset, split, batch_size, device, [&](const data::Batch& batch, const model::TftOutput& out) {
    auto q = out.quantiles.to(at::kCPU).to(at::kDouble).contiguous();
    const double* f = q.data_ptr<double>();
    const auto nq = static_cast<int64_t>(quantiles.size());
    for (int64_t i = 0; i < batch.size(); ++i) {
      const auto& w = batch.windows[static_cast<size_t>(i)];
      const auto& s = dataset.series()[w.series];
      const int64_t origin = w.start + l - 1;
      double median_path = 0.0;
      for (int64_t step = 0; step < h; ++step) {
        const int64_t row = origin + 1 + step;
        table.timestamp_ns.push_back(s.timestamp_ns[row]);
        table.origin_ns.push_back(s.timestamp_ns[origin]);
        table.symbol.push_back(s.symbol);
        table.step.push_back(static_cast<int32_t>(step + 1));
        table.origin_close.push_back(s.close[origin]);
        table.actual_return.push_back(static_cast<double>(s.target[row]) * scale);
        const double* fq = f + (i * h + step) * nq;
        for (int64_t k = 0; k < nq; ++k) {
          double r = fq[k] * scale;
          table.quantile_return[k].push_back(r);
          table.quantile_price[k].push_back(s.close[origin] * std::exp(median_path + r));
        }
        median_path += fq[median] * scale;
      }
    }
  });
  return table;
}

}  // namespace qtft::train
