#include "qtft/memory/rng_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <algorithm>
#include <mutex>

namespace qtft::memory {
namespace {

at::Tensor state_of(at::Generator generator) {  // a handle; mutex() is not const
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

void set_state_of(at::Generator generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

RngState RngState::capture(const std::vector<c10::Device>& devices) {
  RngState s;
  s.cpu_ = state_of(at::detail::getDefaultCPUGenerator());
  for (const c10::Device& d : devices) {
    if (!d.is_cuda()) continue;
    const bool seen = std::any_of(s.cuda_.begin(), s.cuda_.end(), [&](const auto& e) { return e.first == d; });
    if (!seen) s.cuda_.emplace_back(d, state_of(at::globalContext().defaultGenerator(d)));
  }
  return s;
}

RngState RngState::capture_like(const RngState& other) {
  std::vector<c10::Device> devices;
  for (const auto& [device, state] : other.cuda_) devices.push_back(device);
  return capture(devices);
}

CpuRandomStream::CpuRandomStream(uint64_t seed) : state_(at::make_generator<at::CPUGeneratorImpl>(seed).get_state()) {}

void CpuRandomStream::set_state(const at::Tensor& state) {
  // Checked by a throwaway generator, so a malformed state fails here and not mid-run.
  at::make_generator<at::CPUGeneratorImpl>().set_state(state);
  state_ = state.clone();
}

void CpuRandomStream::run(const std::function<void()>& fn) {
  auto generator = at::detail::getDefaultCPUGenerator();
  struct PutBack {
    at::Generator generator;
    at::Tensor callers;
    at::Tensor& ours;
    ~PutBack() {
      ours = state_of(generator);
      set_state_of(generator, callers);
    }
  } put_back{generator, state_of(generator), state_};
  set_state_of(generator, state_);
  fn();
}

void RngState::restore() const {
  set_state_of(at::detail::getDefaultCPUGenerator(), cpu_);
  for (const auto& [device, state] : cuda_) set_state_of(at::globalContext().defaultGenerator(device), state);
}

}  // namespace qtft::memory
