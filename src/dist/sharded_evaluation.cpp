#include "qtft/dist/detail/sharded_evaluation.h"

#include <ATen/ops/cat.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "qtft/data/features/batch.h"
#include "qtft/eval/window_units.h"

namespace qtft::dist {

std::optional<eval::ForecastMetrics> evaluate_sharded(Collective& group, model::TemporalFusionTransformer& model,
                                                      const data::Dataset& dataset, data::Split split,
                                                      size_t batch_size, c10::Device device,
                                                      const std::function<bool()>& stop_requested) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  eval::MetricsAccumulator metrics(model->options().quantiles());
  const auto horizon = model->options().horizon();
  const auto levels = static_cast<int64_t>(metrics.quantiles().size());
  const auto ranks = static_cast<size_t>(group.world_size());
  const auto rank = static_cast<size_t>(group.rank());
  const size_t windows = dataset.num_windows(split);
  const size_t batches = (windows + batch_size - 1) / batch_size;
  const size_t round_windows = batch_size * ranks;
  const auto float_options = at::TensorOptions().dtype(at::kFloat);
  for (size_t first_batch = 0; first_batch < batches; first_batch += ranks) {
    // This round's windows: [round_first, round_end), rank r's batch at r * batch_size.
    const size_t round_first = first_batch * batch_size;
    const size_t round_end = std::min(round_first + round_windows, windows);
    const auto rows = static_cast<int64_t>(round_end - round_first);
    at::Tensor forecasts = at::zeros({rows, horizon, levels}, float_options);
    at::Tensor targets = at::zeros({rows, horizon}, float_options);
    const size_t mine = round_first + rank * batch_size;
    if (mine < round_end) {
      std::vector<size_t> indices(std::min(batch_size, round_end - mine));
      std::iota(indices.begin(), indices.end(), mine);
      const auto batch = data::make_batch(dataset, split, indices);
      const auto out = model->forward(batch.observed.to(device), batch.known.to(device), batch.symbol.to(device),
                                      batch.statics.to(device));
      const auto offset = static_cast<int64_t>(mine - round_first);
      const auto count = static_cast<int64_t>(indices.size());
      forecasts.narrow(0, offset, count).copy_(out.quantiles.to(at::kCPU));
      targets.narrow(0, offset, count).copy_(batch.target);
    }
    // One all-reduce for both: Gloo reads several tensors as replicas of one.
    std::vector<at::Tensor> both{at::cat({forecasts.reshape({-1}), targets.reshape({-1})})};
    group.all_reduce(both, ReduceOp::sum);
    const at::Tensor all_forecasts = both[0].narrow(0, 0, forecasts.numel()).view(forecasts.sizes());
    const at::Tensor all_targets = both[0].narrow(0, forecasts.numel(), targets.numel()).view(targets.sizes());
    // Batch by batch, as one process would add them (the sums are the same either way).
    for (int64_t start = 0; start < rows; start += static_cast<int64_t>(batch_size)) {
      const int64_t count = std::min<int64_t>(static_cast<int64_t>(batch_size), rows - start);
      metrics.add(
          all_forecasts.narrow(0, start, count), all_targets.narrow(0, start, count),
          eval::target_units_of(dataset, split, round_first + static_cast<size_t>(start), static_cast<size_t>(count)));
    }
    if (stop_requested && stop_requested()) {
      model->train(was_training);
      return std::nullopt;
    }
  }
  model->train(was_training);
  return metrics.result();
}

}  // namespace qtft::dist
