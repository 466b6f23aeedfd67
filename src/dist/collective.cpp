#include "qtft/dist/collective.h"

#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <exception>
#include <string>

#include "qtft/common/error.h"
#include "qtft/dist/detail/nccl_backend.h"

namespace qtft::dist {

struct Collective::Group {
  DistributedEnvironment env;
  std::chrono::milliseconds timeout;
  Backend backend = Backend::gloo;
  c10::Device device = c10::Device(c10::kCPU);
  c10::intrusive_ptr<c10d::Backend> group;
  std::atomic<int64_t> operations{0};
};

namespace {

std::string where(const DistributedEnvironment& env) {
  return "rank " + std::to_string(env.rank) + " of " + std::to_string(env.world_size);
}

// Gloo's message without its source location ("[.../pair.cc:561] ") and the advice and
// emoji after the first sentence: "Connection closed by peer [127.0.0.1]:12204".
std::string plain_message(std::string message) {
  if (!message.empty() && message.front() == '[') {
    if (const auto end = message.find("] "); end != std::string::npos) message.erase(0, end + 2);
  }
  if (const auto advice = message.find(". This is typically caused"); advice != std::string::npos) {
    message.erase(advice);
    message += " (that worker ended or crashed: see its own error)";
  }
  return message;
}

// Runs `operation`, turning c10d's exceptions into a qtft::Error that says which rank failed
// doing what.
template <typename F>
void guarded(const DistributedEnvironment& env, const std::string& what, F&& operation) {
  try {
    operation();
  } catch (const c10::Error& e) {
    // c10's what() carries a C++ backtrace; the message alone says what happened.
    throw Error("distributed: " + what + " failed on " + where(env) + ": " + plain_message(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    throw Error("distributed: " + what + " failed on " + where(env) + ": " + plain_message(e.what()));
  }
}

c10d::ReduceOp to_c10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return c10d::ReduceOp(c10d::ReduceOp::RedOpType::SUM);
    case ReduceOp::min: return c10d::ReduceOp(c10d::ReduceOp::RedOpType::MIN);
    case ReduceOp::max: return c10d::ReduceOp(c10d::ReduceOp::RedOpType::MAX);
  }
  throw Error("distributed: unknown reduction");
}

// Gloo's transport device: the loopback interface for a local run, GLOO_SOCKET_IFNAME when
// set, else the interface the host name resolves to.
std::shared_ptr<::gloo::transport::Device> transport_device(const DistributedEnvironment& env) {
  if (const auto ifname = process_environment("GLOO_SOCKET_IFNAME"); ifname && !ifname->empty()) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(*ifname);
  }
  if (env.master_addr == "127.0.0.1" || env.master_addr == "localhost") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// The tensors as the backend takes them: on its device. Those that had to move are copied
// back into the caller's tensors by `return_to`.
struct OnDevice {
  std::vector<at::Tensor> tensors;
  OnDevice(std::vector<at::Tensor>& originals, c10::Device device) {
    for (const auto& t : originals) tensors.push_back(t.device() == device ? t : t.to(device));
  }
  void return_to(std::vector<at::Tensor>& originals) const {
    for (size_t i = 0; i < originals.size(); ++i) {
      if (!tensors[i].is_same(originals[i])) originals[i].copy_(tensors[i]);
    }
  }
};

}  // namespace

Collective Collective::connect(const DistributedEnvironment& env, std::chrono::milliseconds timeout, Backend backend) {
  auto group = std::make_shared<Group>();
  group->env = env;
  group->timeout = timeout;
  group->backend = backend;
  // Refused before the rendezvous, so that no rank waits for one that cannot come.
  if (backend == Backend::nccl) group->device = nccl_device(env.local_rank);
  guarded(env, "the rendezvous at " + env.master_addr + ":" + std::to_string(env.master_port), [&] {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(env.master_port);
    store_options.isServer = env.rank == 0 && !env.launcher_hosts_store;
    store_options.numWorkers = static_cast<int>(env.world_size);
    store_options.waitWorkers = false;
    store_options.timeout = timeout;
    auto tcp = c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
    // A prefix of its own, so that qtft's keys never meet the launcher's.
    auto store = c10::make_intrusive<c10d::PrefixStore>("qtft", tcp);
    const auto rank = static_cast<int>(env.rank);
    const auto size = static_cast<int>(env.world_size);
    if (backend == Backend::nccl) {
      group->group = make_nccl_backend(store, rank, size, timeout, group->device);
      return;
    }
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(transport_device(env));
    group->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
  });
  return Collective(std::move(group));
}

int64_t Collective::rank() const { return group_->env.rank; }
int64_t Collective::world_size() const { return group_->env.world_size; }
Backend Collective::backend() const { return group_->backend; }
c10::Device Collective::device() const { return group_->device; }
int64_t Collective::operations() const { return group_->operations.load(); }

void Collective::all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op) {
  ++group_->operations;
  guarded(group_->env, "all-reduce", [&] {
    c10d::AllreduceOptions options;
    options.reduceOp = to_c10d(op);
    options.timeout = group_->timeout;
    OnDevice moved(tensors, group_->device);
    group_->group->allreduce(moved.tensors, options)->wait(group_->timeout);
    moved.return_to(tensors);
  });
}

void Collective::broadcast(std::vector<at::Tensor>& tensors, int64_t root) {
  ++group_->operations;
  guarded(group_->env, "broadcast", [&] {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.timeout = group_->timeout;
    OnDevice moved(tensors, group_->device);
    group_->group->broadcast(moved.tensors, options)->wait(group_->timeout);
    moved.return_to(tensors);
  });
}

std::vector<at::Tensor> Collective::all_gather(const at::Tensor& tensor) {
  ++group_->operations;
  std::vector<at::Tensor> gathered;
  guarded(group_->env, "all-gather", [&] {
    c10d::AllgatherOptions options;
    options.timeout = group_->timeout;
    std::vector<at::Tensor> input{tensor.to(group_->device).contiguous()};
    std::vector<std::vector<at::Tensor>> output(1);
    for (int64_t r = 0; r < world_size(); ++r) output[0].push_back(at::empty_like(input[0]));
    group_->group->allgather(output, input, options)->wait(group_->timeout);
    for (auto& t : output[0]) gathered.push_back(t.to(tensor.device()));
  });
  return gathered;
}

void Collective::barrier() {
  ++group_->operations;
  guarded(group_->env, "barrier", [&] {
    c10d::BarrierOptions options;
    options.timeout = group_->timeout;
    group_->group->barrier(options)->wait(group_->timeout);
  });
}

}  // namespace qtft::dist
