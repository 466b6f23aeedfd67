#include "qtft/quant/observers.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "qtft/common/error.h"

namespace qtft::quant {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

double buffer_value(const torch::nn::Module& module, const char* name) {
  return module.named_buffers(/*recurse=*/false)[name].item<double>();
}

}  // namespace

std::string observer_name(const std::string& module_path) {
  std::string name = module_path;
  if (ends_with(name, "_quant")) name.resize(name.size() - 6);
  for (const char* suffix : {".output", "_output"}) {
    if (ends_with(name, suffix)) name.resize(name.size() - std::string(suffix).size());
  }
  return name;
}

bool is_observer_state(const std::string& path) { return path.find("_quant.") != std::string::npos; }

std::vector<std::pair<std::string, ActivationFakeQuant>> find_observers(torch::nn::Module& module) {
  std::vector<std::pair<std::string, ActivationFakeQuant>> out;
  for (const auto& item : module.named_modules("", /*include_self=*/false)) {
    if (auto impl = std::dynamic_pointer_cast<ActivationFakeQuantImpl>(item.value())) {
      out.emplace_back(item.key(), ActivationFakeQuant(impl));
    }
  }
  return out;
}

std::vector<ObserverStats> observer_stats(torch::nn::Module& module) {
  std::vector<ObserverStats> out;
  for (auto& [path, observer] : find_observers(module)) {
    ObserverStats s;
    s.name = observer_name(path);
    s.min = buffer_value(*observer, "running_min");
    s.max = buffer_value(*observer, "running_max");
    auto q = observer->qparams();
    s.scale = q.scale;
    s.zero_point = q.zero_point;
    s.samples = observer->samples();
    s.frozen = observer->is_frozen();
    out.push_back(s);
  }
  return out;
}

void set_extremes_reducer(torch::nn::Module& module, const ActivationFakeQuantImpl::ExtremesReducer& reducer) {
  for (auto& [name, observer] : find_observers(module)) observer->set_extremes_reducer(reducer);
}

namespace {
// The observers that recorded something this step, in registration order.
std::vector<ActivationFakeQuantImpl*> observers_with_a_step(torch::nn::Module& module) {
  std::vector<ActivationFakeQuantImpl*> out;
  for (const auto& child : module.modules(/*include_self=*/false)) {
    auto* observer = dynamic_cast<ActivationFakeQuantImpl*>(child.get());
    if (observer && observer->step_extremes().defined()) out.push_back(observer);
  }
  return out;
}
}  // namespace

void set_observer_update(torch::nn::Module& module, ObserverUpdate update) {
  for (auto& [_, observer] : find_observers(module)) observer->set_update(update);
}

at::Tensor step_extremes(torch::nn::Module& module) {
  std::vector<at::Tensor> rows;
  for (auto* observer : observers_with_a_step(module)) rows.push_back(observer->step_extremes());
  if (rows.empty()) return at::empty({0, 2}, at::TensorOptions().dtype(at::kFloat));
  return at::stack(rows);
}

void end_observer_step(torch::nn::Module& module, const at::Tensor& extremes) {
  const auto observers = observers_with_a_step(module);
  if (extremes.dim() != 2 || extremes.size(0) != static_cast<int64_t>(observers.size()) || extremes.size(1) != 2) {
    throw Error("end_observer_step: expected [" + std::to_string(observers.size()) + ", 2] extremes, got " +
                std::to_string(extremes.dim() == 2 ? extremes.size(0) : -1) + " rows");
  }
  for (size_t k = 0; k < observers.size(); ++k) observers[k]->end_step(extremes[static_cast<int64_t>(k)]);
}

void freeze_observers(torch::nn::Module& module) {
  for (auto& [_, observer] : find_observers(module)) observer->freeze();
}

void unfreeze_observers(torch::nn::Module& module) {
  for (auto& [_, observer] : find_observers(module)) observer->unfreeze();
}

bool observers_frozen(torch::nn::Module& module) {
  auto observers = find_observers(module);
  return !observers.empty() &&
         std::all_of(observers.begin(), observers.end(), [](const auto& o) { return o.second->is_frozen(); });
}

std::string format_observer_table(const std::vector<ObserverStats>& stats, size_t limit) {
  std::vector<ObserverStats> rows = stats;
  if (limit > 0 && rows.size() > limit) {
    // The widest ranges are where 8 bits are stretched most: show those.
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.scale > b.scale; });
    rows.resize(limit);
  }
  std::string out;
  char buf[256];
  for (const auto& s : rows) {
    std::snprintf(buf, sizeof buf, "  %s: scale=%.6f, zero_point=%lld, samples=%lld%s\n", s.name.c_str(), s.scale,
                  static_cast<long long>(s.zero_point), static_cast<long long>(s.samples), s.frozen ? ", frozen" : "");
    out += buf;
  }
  if (rows.size() < stats.size()) {
    out += "  ... and " + std::to_string(stats.size() - rows.size()) + " more observers (--verbose lists all)\n";
  }
  return out;
}

}  // namespace qtft::quant
