#include "qtft/eval/evaluate.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/tensor.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <numeric>

namespace qtft::eval {

bool for_each_forecast(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                       size_t batch_size, c10::Device device,
                       const std::function<void(const data::Batch&, const model::TftOutput&)>& visit,
                       const std::function<bool()>& stop_requested) {
  torch::NoGradGuard no_grad;
  bool was_training = model->is_training();
  model->eval();
  const size_t n = dataset.num_windows(split);
  std::vector<size_t> indices(std::min(batch_size, n));
  for (size_t first = 0; first < n; first += batch_size) {
    indices.resize(std::min(batch_size, n - first));
    std::iota(indices.begin(), indices.end(), first);
    auto batch = data::make_batch(dataset, split, indices);
    auto out = model->forward(batch.observed.to(device), batch.known.to(device), batch.symbol.to(device),
                              batch.statics.to(device));
    visit(batch, out);
    if (stop_requested && stop_requested()) {
      model->train(was_training);
      return false;
    }
  }
  model->train(was_training);
  return true;
}

ForecastMetrics evaluate_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                               size_t batch_size, c10::Device device) {
  return *evaluate_model_unless_stopped(model, dataset, split, batch_size, device, {});
}

std::optional<ForecastMetrics> evaluate_model_unless_stopped(model::TemporalFusionTransformer& model,
                                                             const data::Dataset& dataset, data::Split split,
                                                             size_t batch_size, c10::Device device,
                                                             const std::function<bool()>& stop_requested) {
  MetricsAccumulator metrics(model->options().quantiles());
  size_t first = 0;  // the windows arrive in order
  const bool finished = for_each_forecast(
      model, dataset, split, batch_size, device,
      [&](const data::Batch& batch, const model::TftOutput& out) {
        const auto count = static_cast<size_t>(batch.size());
        metrics.add(out.quantiles, batch.target.to(out.quantiles.device()),
                    target_units_of(dataset, split, first, count));
        first += count;
      },
      stop_requested);
  if (!finished) return std::nullopt;
  return metrics.result();
}

Evaluation evaluate_for_desk(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                             size_t batch_size, c10::Device device, double cost_bps) {
  const auto& quantiles = model->options().quantiles();
  MetricsAccumulator metrics(quantiles);
  DeskMetricsAccumulator desk(quantiles, cost_bps);
  const auto encoder = static_cast<size_t>(dataset.options().encoder_length);
  size_t first = 0;
  for_each_forecast(model, dataset, split, batch_size, device,
                    [&](const data::Batch& batch, const model::TftOutput& out) {
                      const auto count = static_cast<size_t>(batch.size());
                      const WindowUnits units = target_units_of(dataset, split, first, count);
                      const at::Tensor target = batch.target.to(out.quantiles.device());
                      metrics.add(out.quantiles, target, units);
                      const auto options = at::TensorOptions().dtype(at::kDouble);
                      const at::Tensor scale = at::tensor(units.scale, options).view({-1, 1});
                      const at::Tensor center = at::tensor(units.center, options).view({-1, 1});
                      std::vector<int64_t> series, first_bar_ns;
                      for (const data::WindowRef& w : batch.windows) {
                        const auto& view = dataset.series()[w.series];
                        series.push_back(view.symbol_id);
                        first_bar_ns.push_back(view.timestamp_ns[w.start + encoder]);
                      }
                      const at::Tensor forecast = out.quantiles.to(at::kCPU, at::kDouble);
                      desk.add(forecast * scale.unsqueeze(-1) + center.unsqueeze(-1),
                               batch.target.to(at::kDouble) * scale + center, series, first_bar_ns);
                      first += count;
                    });
  return {metrics.result(), desk.result()};
}

}  // namespace qtft::eval
