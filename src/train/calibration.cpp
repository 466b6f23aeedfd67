#include "qtft/train/calibration.h"

#include <torch/csrc/autograd/grad_mode.h>

#include <span>

#include "qtft/data/features/batch.h"
#include "qtft/data/features/batch_order.h"
#include "qtft/quant/observers.h"

namespace qtft::train {

void calibrate_observers(model::TemporalFusionTransformer& model, const data::Dataset& dataset, int64_t batches,
                         size_t batch_size, uint64_t seed, c10::Device device,
                         const std::function<bool()>& stop_requested, quant::ObserverUpdate update,
                         const dist::Ranks& ranks) {
  // Across ranks each rank sees its share of a batch, so the observers must take the batch in
  // at its end, from every rank's extremes: Step, whatever training uses (calibration runs
  // no backward pass, so each observer is called once a batch and the two modes agree).
  if (ranks.count() > 1) update = quant::ObserverUpdate::Step;
  torch::NoGradGuard no_grad;
  // The model leaves as it came, however the loop ends (a stop, an error).
  struct Restore {
    model::TemporalFusionTransformer& model;
    bool was_training;
    ~Restore() {
      quant::set_observer_update(*model, quant::ObserverUpdate::Immediate);
      model->train(was_training);
    }
  } restore{model, model->is_training()};
  model->eval();
  auto observers = quant::find_observers(*model);
  for (auto& [_, observer] : observers) observer->train();
  quant::set_observer_update(*model, update);
  const size_t global_batch = batch_size * static_cast<size_t>(ranks.count());
  const auto windows = data::calibration_windows(dataset.num_windows(data::Split::Train), batches, global_batch, seed);
  const size_t share = static_cast<size_t>(ranks.rank()) * batch_size;
  for (int64_t b = 0; b < batches; ++b) {
    std::span<const size_t> ids(windows.data() + static_cast<size_t>(b) * global_batch + share, batch_size);
    auto batch = data::make_batch(dataset, data::Split::Train, ids);
    model->forward(batch.observed.to(device), batch.known.to(device), batch.symbol.to(device),
                   batch.statics.to(device));
    bool stop = stop_requested && stop_requested();
    if (update == quant::ObserverUpdate::Step) stop = ranks.end_step(*model, 0.0, stop).stop;
    if (stop) {
      throw Interrupted("interrupted during QAT calibration (batch " + std::to_string(b + 1) + " of " +
                        std::to_string(batches) + "), before training began: nothing to save");
    }
  }
}

}  // namespace qtft::train
