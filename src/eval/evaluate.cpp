#include "qtft/eval/evaluate.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/tensor.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <numeric>

namespace qtft::eval {

namespace {

// The walk both for_each_forecast overloads take: batches of `batch_size` windows, the
// indices of the batch starting at `first` given by `fill`.
bool walk_batches(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split, size_t n,
                  size_t batch_size, c10::Device device,
                  const std::function<void(size_t first, std::vector<size_t>& indices)>& fill,
                  const std::function<void(const data::Batch&, const model::TftOutput&)>& visit,
                  const std::function<bool()>& stop_requested) {
  torch::NoGradGuard no_grad;
  bool was_training = model->is_training();
  model->eval();
  std::vector<size_t> indices(std::min(batch_size, n));
  for (size_t first = 0; first < n; first += batch_size) {
    indices.resize(std::min(batch_size, n - first));
    fill(first, indices);
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

}  // namespace

bool for_each_forecast(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                       size_t batch_size, c10::Device device,
                       const std::function<void(const data::Batch&, const model::TftOutput&)>& visit,
                       const std::function<bool()>& stop_requested) {
  return walk_batches(
      model, dataset, split, dataset.num_windows(split), batch_size, device,
      [](size_t first, std::vector<size_t>& indices) { std::iota(indices.begin(), indices.end(), first); }, visit,
      stop_requested);
}

bool for_each_forecast(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                       std::span<const size_t> indices, size_t batch_size, c10::Device device,
                       const std::function<void(const data::Batch&, const model::TftOutput&)>& visit,
                       const std::function<bool()>& stop_requested) {
  return walk_batches(
      model, dataset, split, indices.size(), batch_size, device,
      [&](size_t first, std::vector<size_t>& batch) {
        std::copy_n(indices.begin() + static_cast<std::ptrdiff_t>(first), batch.size(), batch.begin());
      },
      visit, stop_requested);
}

ForecastMetrics evaluate_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                               size_t batch_size, c10::Device device) {
  return *evaluate_model_unless_stopped(model, dataset, split, batch_size, device, {});
}

namespace {

// The desk's inputs of a batch: forecasts and outcomes in the target's units, each window's
// series and the time of its first forecast bar.
void add_to_desk(DeskMetricsAccumulator& desk, const data::Dataset& dataset, const data::Batch& batch,
                 const at::Tensor& quantiles, const WindowUnits& units) {
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor scale = at::tensor(units.scale, options).view({-1, 1});
  const at::Tensor center = at::tensor(units.center, options).view({-1, 1});
  const auto encoder = static_cast<size_t>(dataset.options().encoder_length);
  std::vector<int64_t> series, first_bar_ns;
  for (const data::WindowRef& w : batch.windows) {
    const auto& view = dataset.series()[w.series];
    series.push_back(view.symbol_id);
    first_bar_ns.push_back(view.timestamp_ns[w.start + encoder]);
  }
  desk.add(quantiles.to(at::kCPU, at::kDouble) * scale.unsqueeze(-1) + center.unsqueeze(-1),
           batch.target.to(at::kDouble) * scale + center, series, first_bar_ns);
}

// The one walk over the split's windows in order: the metrics, and the desk's when given.
// The metrics of a batch, and the desk's when given.
std::function<void(const data::Batch&, const model::TftOutput&)> accumulating(
    const data::Dataset& dataset, MetricsAccumulator& metrics, DeskMetricsAccumulator* desk,
    const std::function<void(const data::Batch&, const model::TftOutput&)>& visit = {}) {
  return [&dataset, &metrics, desk, visit](const data::Batch& batch, const model::TftOutput& out) {
    const WindowUnits units = target_units_of(dataset, batch.windows);
    metrics.add(out.quantiles, batch.target.to(out.quantiles.device()), units);
    if (desk) add_to_desk(*desk, dataset, batch, out.quantiles, units);
    if (visit) visit(batch, out);
  };
}

}  // namespace

std::optional<ForecastMetrics> evaluate_model_unless_stopped(model::TemporalFusionTransformer& model,
                                                             const data::Dataset& dataset, data::Split split,
                                                             size_t batch_size, c10::Device device,
                                                             const std::function<bool()>& stop_requested) {
  MetricsAccumulator metrics(model->options().quantiles());
  if (!for_each_forecast(model, dataset, split, batch_size, device, accumulating(dataset, metrics, nullptr),
                         stop_requested)) {
    return std::nullopt;
  }
  return metrics.result();
}

Evaluation evaluate_for_desk(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                             size_t batch_size, c10::Device device, double cost_bps,
                             const std::function<void(const data::Batch&, const model::TftOutput&)>& visit) {
  const auto& quantiles = model->options().quantiles();
  MetricsAccumulator metrics(quantiles);
  DeskMetricsAccumulator desk(quantiles, cost_bps);
  for_each_forecast(model, dataset, split, batch_size, device, accumulating(dataset, metrics, &desk, visit));
  return {metrics.result(), desk.result()};
}

Evaluation evaluate_windows_for_desk(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                     data::Split split, std::span<const size_t> indices, size_t batch_size,
                                     c10::Device device, double cost_bps,
                                     const std::function<void(const data::Batch&, const model::TftOutput&)>& visit) {
  const auto& quantiles = model->options().quantiles();
  MetricsAccumulator metrics(quantiles);
  DeskMetricsAccumulator desk(quantiles, cost_bps);
  for_each_forecast(model, dataset, split, indices, batch_size, device, accumulating(dataset, metrics, &desk, visit));
  return {metrics.result(), desk.result()};
}

}  // namespace qtft::eval
