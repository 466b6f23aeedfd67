#include "qtft/train/calibration.h"

#include <torch/csrc/autograd/grad_mode.h>

#include "qtft/data/batch.h"
#include "qtft/data/batch_order.h"
#include "qtft/quant/observers.h"

namespace qtft::train {

void calibrate_observers(model::TemporalFusionTransformer& model, const data::Dataset& dataset, int64_t batches,
                         size_t batch_size, uint64_t seed, c10::Device device,
                         const std::function<bool()>& stop_requested) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  auto observers = quant::find_observers(*model);
  for (auto& [_, observer] : observers) observer->train();
  const size_t windows = dataset.num_windows(data::Split::Train);
  data::BatchOrder order(windows, batch_size, seed, true);
  // Epoch -1: a permutation of its own, so calibration does not replay epoch 0's batches.
  auto indices = order.epoch_order(-1);
  for (int64_t b = 0; b < batches; ++b) {
    size_t first = (static_cast<size_t>(b) * batch_size) % windows;
    std::vector<size_t> ids;
    for (size_t i = 0; i < batch_size; ++i) ids.push_back(indices[(first + i) % windows]);
    auto batch = data::make_batch(dataset, data::Split::Train, ids);
    model->forward(batch.observed.to(device), batch.known.to(device), batch.symbol.to(device));
    if (stop_requested && stop_requested()) {
      model->train(was_training);
      throw Interrupted("interrupted during QAT calibration (batch " + std::to_string(b + 1) + " of " +
                        std::to_string(batches) + "), before training began: nothing to save");
    }
  }
  model->train(was_training);
}

}  // namespace qtft::train
