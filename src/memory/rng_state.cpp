#include "qtft/memory/rng_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <optional>

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

namespace {

// A generator's state after seeding it with `seed`, leaving the generator as it was.
at::Tensor seeded_state(at::Generator generator, uint64_t seed) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  const at::Tensor callers = generator.get_state();
  generator.set_current_seed(seed);  // CUDA: also starts the Philox offset at 0
  at::Tensor seeded = generator.get_state();
  generator.set_state(callers);
  return seeded;
}

// Sets `state` on `generator` for the duration of a call, then keeps what the call left in
// `ours` and puts the generator's own state back, however the call ends.
class Lent {
 public:
  Lent(at::Generator generator, at::Tensor& ours)
      : generator_(std::move(generator)), callers_(state_of(generator_)), ours_(ours) {
    set_state_of(generator_, ours_);
  }
  ~Lent() {
    try {
      ours_ = state_of(generator_);
    } catch (const c10::Error&) {
      // Out of memory for the state's copy while a failed call unwinds: ours stays as it was
      // before the call, which is what a caller that retries the call wants anyway.
    }
    try {
      set_state_of(generator_, callers_);
    } catch (...) {
      // A destructor that throws while an error unwinds ends the process; the state was the
      // generator's own a moment ago, so this cannot fail short of a broken LibTorch.
    }
  }
  Lent(const Lent&) = delete;
  Lent& operator=(const Lent&) = delete;

 private:
  at::Generator generator_;
  at::Tensor callers_;
  at::Tensor& ours_;
};

at::Generator cuda_generator(c10::Device device) {
  // The index LibTorch's kernels use for a tensor on "cuda" without one is the current device.
  if (!device.has_index()) device = c10::Device(c10::kCUDA, 0);
  return at::globalContext().defaultGenerator(device);
}

}  // namespace

RandomStream::RandomStream(uint64_t seed, c10::Device device)
    : device_(device), cpu_state_(at::make_generator<at::CPUGeneratorImpl>(seed).get_state()) {
  if (device_.is_cuda()) cuda_state_ = seeded_state(cuda_generator(device_), seed);
}

void RandomStream::set_state(const at::Tensor& state) {
  // Checked by a throwaway generator, so a malformed state fails here and not mid-run.
  at::make_generator<at::CPUGeneratorImpl>().set_state(state);
  cpu_state_ = state.clone();
}

void RandomStream::set_cuda_state(const at::Tensor& state) {
  if (!device_.is_cuda()) return;
  // Checked on the device's generator itself, which is then put back as it was.
  at::Generator generator = cuda_generator(device_);
  std::lock_guard<std::mutex> lock(generator.mutex());
  const at::Tensor callers = generator.get_state();
  generator.set_state(state);
  generator.set_state(callers);
  cuda_state_ = state.clone();
}

void RandomStream::run(const std::function<void()>& fn) {
  Lent cpu(at::detail::getDefaultCPUGenerator(), cpu_state_);
  std::optional<Lent> cuda;
  if (device_.is_cuda()) cuda.emplace(cuda_generator(device_), cuda_state_);
  fn();
}

void RngState::restore() const {
  set_state_of(at::detail::getDefaultCPUGenerator(), cpu_);
  for (const auto& [device, state] : cuda_) set_state_of(at::globalContext().defaultGenerator(device), state);
}

}  // namespace qtft::memory
