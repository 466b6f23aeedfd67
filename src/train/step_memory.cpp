#include "qtft/train/step_memory.h"
#include "qtft/model/model_building.h"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/memory/autocast.h"
#include "qtft/memory/memory_tracker.h"
#include "qtft/memory/rng_state.h"
#include "qtft/quant/activation_observer.h"
#include "qtft/train/fused_adam.h"
#include "qtft/train/train_step.h"

namespace qtft::train {
namespace {

// Puts the global random state back when the measurement ends, however it ends. The
// measured steps' dropout draws from the process's generators (the CPU one, and the
// device's CUDA one), so all of them are saved, not only the measured device's.
class RandomStateGuard {
 public:
  RandomStateGuard() : saved_(memory::RngState::capture(cuda_devices())) {}
  ~RandomStateGuard() { saved_.restore(); }
  RandomStateGuard(const RandomStateGuard&) = delete;
  RandomStateGuard& operator=(const RandomStateGuard&) = delete;

 private:
  static std::vector<c10::Device> cuda_devices() {
    std::vector<c10::Device> devices;
    if (!at::hasCUDA()) return devices;
    for (c10::DeviceIndex i = 0; i < torch::cuda::device_count(); ++i) devices.emplace_back(c10::kCUDA, i);
    return devices;
  }
  memory::RngState saved_;
};

void synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

int64_t current_bytes(c10::Device device) { return memory::memory_stats(device).current_bytes; }

// The caller's batch on the device as tensors of this measurement: on CPU a copy, so that
// it is counted like the CUDA copy is (training_step's .to(device) is then a no-op).
data::Batch batch_on(const data::Batch& batch, c10::Device device) {
  auto place = [&](const at::Tensor& t) { return device.is_cpu() ? t.clone() : t.to(device); };
  return {place(batch.observed), place(batch.known),  place(batch.symbol),
          place(batch.statics),  place(batch.target), batch.windows};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

double percent(int64_t part, int64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// format_bytes for a difference that may be negative (a policy that costs memory).
std::string signed_bytes(int64_t bytes) {
  std::string text = bytes < 0 ? "-" : "";
  text += format_bytes(static_cast<uint64_t>(bytes < 0 ? -bytes : bytes));
  return text;
}

std::string format_seconds(double s) {
  char buf[32];
  if (s < 1.0) {
    std::snprintf(buf, sizeof buf, "%.1f ms", 1000.0 * s);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", s);
  }
  return buf;
}

}  // namespace

int64_t parameter_bytes(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += static_cast<int64_t>(p.nbytes());
  return n;
}

int64_t gradient_bytes(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) {
    if (p.grad().defined()) n += static_cast<int64_t>(p.grad().nbytes());
  }
  return n;
}

int64_t adam_state_bytes(torch::optim::Adam& adam) {
  int64_t n = 0;
  auto add = [&](const at::Tensor& t) {
    if (t.defined()) n += static_cast<int64_t>(t.nbytes());
  };
  for (const auto& [key, state] : adam.state()) {
    const auto& s = static_cast<const torch::optim::AdamParamState&>(*state);
    add(s.exp_avg());
    add(s.exp_avg_sq());
    add(s.max_exp_avg_sq());
  }
  return n;
}

int64_t observer_bytes(torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& m : model.modules()) {
    if (dynamic_cast<quant::ActivationFakeQuantImpl*>(m.get()) == nullptr) continue;
    for (const auto& b : m->buffers(/*recurse=*/false)) n += static_cast<int64_t>(b.nbytes());
  }
  return n;
}

int64_t training_state_bytes(torch::nn::Module& model, torch::optim::Adam& adam) {
  int64_t buffers = 0;
  for (const auto& b : model.buffers()) buffers += static_cast<int64_t>(b.nbytes());
  return parameter_bytes(model) + gradient_bytes(model) + buffers + adam_state_bytes(adam);
}

StepMemory measure_training_step(const model::TftOptions& options, uint64_t seed, const data::Batch& batch,
                                 const TrainOptions& train, memory::CheckpointPolicy policy, c10::Device device,
                                 int timed_steps) {
  if (policy == memory::CheckpointPolicy::Auto) {
    throw UsageError(
        "measure_training_step: the checkpoint policy 'auto' must be resolved to none, blocks or lstm first");
  }
  if (timed_steps < 0) throw UsageError("--timed-steps must not be negative, got " + std::to_string(timed_steps));
  // Installing the tracker here, late, could hand oneDNN buffers to the wrong deleter; the
  // program installs it first thing (qtft's main does).
  if (device.is_cpu() && !memory::cpu_memory_tracking_installed()) {
    throw Error(
        "measuring a training step's memory on the CPU needs the tracking allocator, which this program has "
        "not installed: call qtft::memory::install_cpu_memory_tracking() first thing in main()");
  }
  RandomStateGuard keep_random_state;

  StepMemory r;
  // What an earlier measurement left cached would count in this one's reserved peak.
  memory::release_cached_memory(device);
  const int64_t before_model = current_bytes(device);
  memory::reset_peak(device);
  memory::require_precision_support(train.precision, device);
  auto model = model::build_model(options, seed);
  model->set_checkpoint_policy(policy);
  model->set_precision(train.precision);
  FusedAdam adam(model->parameters(), torch::optim::AdamOptions(train.learning_rate).weight_decay(train.weight_decay));
  int64_t baseline = before_model;
  const auto record = [&] {
    const auto stats = memory::memory_stats(device);
    r.weights_bytes = parameter_bytes(*model);
    r.gradients_bytes = gradient_bytes(*model);
    r.optimizer_bytes = adam_state_bytes(adam);
    r.observer_bytes = observer_bytes(*model);
    r.activation_peak_bytes = stats.peak_bytes - baseline;
    r.total_peak_bytes = stats.peak_bytes - before_model;
    r.reserved_peak_bytes = device.is_cuda() ? stats.peak_reserved_bytes : r.total_peak_bytes;
  };
  double measured_seconds = 0.0;
  data::Batch on_device;
  try {
    model->to(device);
    model->train();
    on_device = batch_on(batch, device);

    training_step(model, adam, on_device, train.clip_norm, device);
    synchronize(device);

    baseline = current_bytes(device);
    memory::reset_peak(device);
    const auto measured_start = std::chrono::steady_clock::now();
    training_step(model, adam, on_device, train.clip_norm, device);
    synchronize(device);
    measured_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - measured_start).count();
    record();
  } catch (const c10::OutOfMemoryError&) {
    // What fits is the question: "does not" is an answer, with the peak it reached.
    record();
    r.out_of_memory = true;
    return r;
  }

  std::vector<double> seconds;
  for (int s = 0; s < timed_steps; ++s) {
    synchronize(device);
    auto start = std::chrono::steady_clock::now();
    training_step(model, adam, on_device, train.clip_norm, device);
    synchronize(device);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  r.step_seconds = seconds.empty() ? measured_seconds : median(std::move(seconds));
  return r;
}

double MemoryReport::step_time_ratio() const {
  if (without.out_of_memory || with.out_of_memory) return 0.0;
  return without.step_seconds > 0 ? with.step_seconds / without.step_seconds : 0.0;
}

MemoryReport measure_memory_report(const model::TftOptions& options, uint64_t seed, const data::Batch& batch,
                                   const TrainOptions& train, memory::CheckpointPolicy policy, c10::Device device,
                                   int timed_steps) {
  MemoryReport report;
  report.policy = policy;
  report.without =
      measure_training_step(options, seed, batch, train, memory::CheckpointPolicy::None, device, timed_steps);
  report.with = measure_training_step(options, seed, batch, train, policy, device, timed_steps);
  return report;
}

nlohmann::json to_json(const StepMemory& s) {
  return {{"weights_bytes", s.weights_bytes},
          {"gradients_bytes", s.gradients_bytes},
          {"optimizer_bytes", s.optimizer_bytes},
          {"observer_bytes", s.observer_bytes},
          {"activation_peak_bytes", s.activation_peak_bytes},
          {"total_peak_bytes", s.total_peak_bytes},
          {"reserved_peak_bytes", s.reserved_peak_bytes},
          {"step_seconds", s.step_seconds},
          {"out_of_memory", s.out_of_memory}};
}

nlohmann::json to_json(const MemoryReport& r) {
  const int64_t total_saved = r.without.total_peak_bytes - r.with.total_peak_bytes;
  const int64_t activation_saved = r.without.activation_peak_bytes - r.with.activation_peak_bytes;
  return {{"policy", memory::checkpoint_policy_name(r.policy)},
          {"without", to_json(r.without)},
          {"with", to_json(r.with)},
          {"savings",
           {{"total_peak_bytes", total_saved},
            {"total_peak_percent", percent(total_saved, r.without.total_peak_bytes)},
            {"activation_peak_bytes", activation_saved},
            {"activation_peak_percent", percent(activation_saved, r.without.activation_peak_bytes)}}},
          {"step_time_ratio", r.step_time_ratio()}};
}

std::string format_memory_report(const MemoryReport& r) {
  const std::string with_header = std::string("with ") + memory::checkpoint_policy_name(r.policy);
  std::string out;
  char line[160];
  auto row = [&](const char* label, const std::string& a, const std::string& b, const std::string& c) {
    std::snprintf(line, sizeof line, "%-16s %22s %14s %18s\n", label, a.c_str(), b.c_str(), c.c_str());
    out += line;
  };
  auto bytes_row = [&](const char* label, int64_t without, int64_t with) {
    char saved[64];
    std::snprintf(saved, sizeof saved, "%s (%.1f%%)", signed_bytes(without - with).c_str(),
                  percent(without - with, without));
    row(label, signed_bytes(without), signed_bytes(with), saved);
  };
  row("", "without checkpointing", with_header, "saved");
  bytes_row("model weights", r.without.weights_bytes, r.with.weights_bytes);
  bytes_row("gradients", r.without.gradients_bytes, r.with.gradients_bytes);
  bytes_row("optimizer state", r.without.optimizer_bytes, r.with.optimizer_bytes);
  bytes_row("QAT observers", r.without.observer_bytes, r.with.observer_bytes);
  bytes_row("activation peak", r.without.activation_peak_bytes, r.with.activation_peak_bytes);
  bytes_row("total peak", r.without.total_peak_bytes, r.with.total_peak_bytes);
  // CUDA's caching allocator reserves more than it hands out; on the CPU the two are one.
  if (r.without.reserved_peak_bytes != r.without.total_peak_bytes ||
      r.with.reserved_peak_bytes != r.with.total_peak_bytes) {
    bytes_row("reserved peak", r.without.reserved_peak_bytes, r.with.reserved_peak_bytes);
  }
  const bool any_out_of_memory = r.without.out_of_memory || r.with.out_of_memory;
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.2fx", r.step_time_ratio());
  const auto seconds = [](const StepMemory& s) {
    return s.out_of_memory ? "out of memory" : format_seconds(s.step_seconds);
  };
  row("step time", seconds(r.without), seconds(r.with), any_out_of_memory ? "-" : ratio);
  if (any_out_of_memory) {
    out += "(a step that ran out of memory shows the peaks it reached before it failed)\n";
  }
  return out;
}

}  // namespace qtft::train
