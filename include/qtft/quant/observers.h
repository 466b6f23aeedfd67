#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qtft/quant/activation_observer.h"

namespace torch::nn {
class Module;
}

namespace qtft::quant {

// One observer as users see it: its name follows the module tree
// ("static_vsn.flattened_grn.fc1", "lstm_encoder", "temporal_attention.probabilities").
struct ObserverStats {
  std::string name;
  double min = 0.0, max = 0.0;
  double scale = 0.0;
  int64_t zero_point = 0;
  int64_t samples = 0;
  bool frozen = false;
};

// "a.b.output_quant" -> "a.b"; "lstm_encoder_output_quant" -> "lstm_encoder";
// "temporal_attention.probabilities_quant" -> "temporal_attention.probabilities".
std::string observer_name(const std::string& module_path);

// Whether a parameter/buffer path belongs to an observer ("...output_quant.scale"): the
// state an FP32 model lacks and a converted one starts fresh.
bool is_observer_state(const std::string& path);

// Every activation observer in the module tree, in registration order.
std::vector<std::pair<std::string, ActivationFakeQuant>> find_observers(torch::nn::Module& module);
std::vector<ObserverStats> observer_stats(torch::nn::Module& module);

void freeze_observers(torch::nn::Module& module);
// Lets every observer learn again (an update of a deployed model): its moving averages go on.
void unfreeze_observers(torch::nn::Module& module);
// ActivationFakeQuantImpl::set_extremes_reducer on every observer of the module.
void set_extremes_reducer(torch::nn::Module& module, const ActivationFakeQuantImpl::ExtremesReducer& reducer);
// ActivationFakeQuantImpl::set_update on every observer of the module.
void set_observer_update(torch::nn::Module& module, ObserverUpdate update);
// Step mode: the step's [min, max] of every observer that took something in since the step
// began, in registration order, as float [K, 2] (K = 0: none did).
at::Tensor step_extremes(torch::nn::Module& module);
// Ends the step of those same observers, in the same order: the k-th takes row k of
// `extremes` (what step_extremes gave, or its min and max over the ranks).
void end_observer_step(torch::nn::Module& module, const at::Tensor& extremes);
// True when the module has observers and all of them are frozen.
bool observers_frozen(torch::nn::Module& module);

// The table printed after calibration and by `qtft inspect`: all rows, or the `limit`
// with the most samples then widest range, and a count of the rest.
std::string format_observer_table(const std::vector<ObserverStats>& stats, size_t limit = 0);

}  // namespace qtft::quant
