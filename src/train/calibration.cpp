#include "qtft/train/calibration.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <span>

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
  const auto windows = data::calibration_windows(dataset.num_windows(data::Split::Train), batches, batch_size, seed);
  for (int64_t b = 0; b < batches; ++b) {
    std::span<const size_t> ids(windows.data() + static_cast<size_t>(b) * batch_size, batch_size);
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
