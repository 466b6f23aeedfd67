#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "qtft/data/features/dataset.h"
#include "qtft/eval/metrics.h"
#include "qtft/model/tft.h"
#include "qtft/quant/observer_update.h"

namespace qtft::dist {

class Collective;

// The ranks a trainer shares its work with. One process is a world of one: every call then
// does what a single process does (no collective, the whole batch, the last batch of an
// epoch even when smaller), so that code above dist never asks whether it is distributed.
class Ranks {
 public:
  // A world of one.
  Ranks() = default;
  // The group's ranks; a null group is a world of one.
  explicit Ranks(std::shared_ptr<Collective> group);

  int64_t count() const;
  int64_t rank() const;
  bool leader() const { return rank() == 0; }

  // Steps per epoch over `windows` training windows at `batch_size` per rank. Across ranks
  // only whole global batches, so that every rank has its share (throws qtft::Error naming
  // the sizes when there is not one); alone every batch, the last one possibly smaller.
  size_t steps_per_epoch(size_t windows, size_t batch_size) const;
  // This rank's positions [first, end) in the epoch's order for step `step`.
  std::pair<size_t, size_t> share_of_step(size_t step, size_t windows, size_t batch_size) const;

  // What averages the module's gradients over the ranks after the backward pass; empty
  // alone, so that a single process's step builds nothing for it.
  std::function<void()> gradient_averaging(torch::nn::Module& module) const;
  // How many collective operations this process has run (0 alone).
  int64_t collectives() const;

  // What a step's end tells every rank.
  struct StepOutcome {
    double mean_loss = 0.0;
    bool stop = false;
  };
  // Ends a training step after the optimizer step, in one collective across ranks (none
  // alone): this rank's loss and stop request go to every rank with the step extremes of
  // the module's step-mode observers; every such observer then takes in the min and max
  // over the ranks (quant::end_observer_step). Every rank must call it once per step.
  StepOutcome end_step(torch::nn::Module& module, double loss, bool stop_requested) const;
  void barrier() const;
  void broadcast_weights(torch::nn::Module& module) const;  // rank 0's, to every rank
  // `local` on any rank stops every rank (one all-reduce per call); alone, `local` itself.
  std::function<bool()> stop_on_any_rank(std::function<bool()> local) const;
  // eval::evaluate_model_unless_stopped, shared out over the ranks (dist::evaluate_sharded:
  // the same bits).
  std::optional<eval::ForecastMetrics> evaluate(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                                data::Split split, size_t batch_size, c10::Device device,
                                                const std::function<bool()>& stop_requested) const;

  // While it lives, the model's live observers update as `update` says: Step, from the
  // extremes end_step hands them; Immediate, in every forward, from the min and max over
  // all ranks (dist::reduce_extremes; one collective per observer and forward). On its end
  // they are back to Immediate, on this process's batches alone.
  class ObserverUpdates {
   public:
    ObserverUpdates(model::TemporalFusionTransformer model, const Ranks& ranks, quant::ObserverUpdate update);
    ~ObserverUpdates();
    ObserverUpdates(const ObserverUpdates&) = delete;
    ObserverUpdates& operator=(const ObserverUpdates&) = delete;

   private:
    model::TemporalFusionTransformer model_;
  };

 private:
  std::shared_ptr<Collective> group_;
};

}  // namespace qtft::dist
