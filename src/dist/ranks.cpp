#include "qtft/dist/ranks.h"

#include <algorithm>
#include <string>

#include "qtft/common/error.h"
#include "qtft/dist/collective.h"
#include "qtft/dist/detail/data_parallel.h"
#include "qtft/dist/detail/sharded_evaluation.h"
#include "qtft/eval/evaluate.h"
#include "qtft/quant/observers.h"

namespace qtft::dist {

Ranks::Ranks(std::shared_ptr<Collective> group) : group_(std::move(group)) {}

int64_t Ranks::count() const { return group_ ? group_->world_size() : 1; }
int64_t Ranks::rank() const { return group_ ? group_->rank() : 0; }

size_t Ranks::steps_per_epoch(size_t windows, size_t batch_size) const {
  const size_t global_batch = batch_size * static_cast<size_t>(count());
  if (!group_) return (windows + global_batch - 1) / global_batch;
  const size_t steps = windows / global_batch;
  if (steps == 0) {
    throw Error("data parallelism: the training split has " + std::to_string(windows) + " windows, fewer than one " +
                "global batch of " + std::to_string(global_batch) + " (--batch-size x " + std::to_string(count()) +
                " ranks)");
  }
  return steps;
}

std::pair<size_t, size_t> Ranks::share_of_step(size_t step, size_t windows, size_t batch_size) const {
  const size_t global_first = step * batch_size * static_cast<size_t>(count());
  if (!group_) return {global_first, std::min(global_first + batch_size, windows)};
  const size_t first = global_first + static_cast<size_t>(rank()) * batch_size;
  return {first, first + batch_size};
}

std::function<void()> Ranks::gradient_averaging(torch::nn::Module& module) const {
  if (!group_) return {};
  return [group = group_, &module] { average_gradients(*group, module.parameters()); };
}

int64_t Ranks::collectives() const { return group_ ? group_->operations() : 0; }

Ranks::StepOutcome Ranks::end_step(torch::nn::Module& module, double loss, bool stop_requested) const {
  at::Tensor extremes = quant::step_extremes(module);
  StepOutcome outcome{loss, stop_requested};
  if (group_) {
    auto exchanged = exchange_step(*group_, extremes, loss, stop_requested);
    extremes = exchanged.extremes;
    outcome = {exchanged.mean_loss, exchanged.stop};
  }
  if (extremes.size(0) > 0) quant::end_observer_step(module, extremes);
  return outcome;
}

void Ranks::barrier() const {
  if (group_) group_->barrier();
}

void Ranks::broadcast_weights(torch::nn::Module& module) const {
  if (group_) dist::broadcast_weights(*group_, module);
}

std::function<bool()> Ranks::stop_on_any_rank(std::function<bool()> local) const {
  return dist::stop_on_any_rank(group_, std::move(local));
}

std::optional<eval::ForecastMetrics> Ranks::evaluate(model::TemporalFusionTransformer& model,
                                                     const data::Dataset& dataset, data::Split split, size_t batch_size,
                                                     c10::Device device,
                                                     const std::function<bool()>& stop_requested) const {
  if (group_) return evaluate_sharded(*group_, model, dataset, split, batch_size, device, stop_requested);
  return eval::evaluate_model_unless_stopped(model, dataset, split, batch_size, device, stop_requested);
}

Ranks::ObserverUpdates::ObserverUpdates(model::TemporalFusionTransformer model, const Ranks& ranks,
                                        quant::ObserverUpdate update)
    : model_(std::move(model)) {
  quant::set_observer_update(*model_, update);
  if (update == quant::ObserverUpdate::Immediate && ranks.group_) {
    quant::set_extremes_reducer(*model_,
                                [group = ranks.group_](at::Tensor& min_max) { reduce_extremes(*group, min_max); });
  }
}

Ranks::ObserverUpdates::~ObserverUpdates() {
  quant::set_observer_update(*model_, quant::ObserverUpdate::Immediate);
  quant::set_extremes_reducer(*model_, {});
}

}  // namespace qtft::dist
