#include "qtft/dist/collective.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <exception>
#include <string>

#include "qtft/common/error.h"

namespace qtft::dist {

struct Collective::Group {
  DistributedEnvironment env;
  std::chrono::milliseconds timeout;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
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

}  // namespace

Collective Collective::connect(const DistributedEnvironment& env, std::chrono::milliseconds timeout) {
  auto group = std::make_shared<Group>(Group{env, timeout, {}});
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
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(transport_device(env));
    group->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, static_cast<int>(env.rank),
                                                               static_cast<int>(env.world_size), options);
  });
  return Collective(std::move(group));
}

int64_t Collective::rank() const { return group_->env.rank; }
int64_t Collective::world_size() const { return group_->env.world_size; }

void Collective::all_reduce(std::vector<at::Tensor>& tensors, ReduceOp op) {
  guarded(group_->env, "all-reduce", [&] {
    c10d::AllreduceOptions options;
    options.reduceOp = to_c10d(op);
    options.timeout = group_->timeout;
    group_->group->allreduce(tensors, options)->wait(group_->timeout);
  });
}

void Collective::broadcast(std::vector<at::Tensor>& tensors, int64_t root) {
  guarded(group_->env, "broadcast", [&] {
    c10d::BroadcastOptions options;
    options.rootRank = root;
    options.timeout = group_->timeout;
    group_->group->broadcast(tensors, options)->wait(group_->timeout);
  });
}

void Collective::barrier() {
  guarded(group_->env, "barrier", [&] {
    c10d::BarrierOptions options;
    options.timeout = group_->timeout;
    group_->group->barrier(options)->wait(group_->timeout);
  });
}

}  // namespace qtft::dist
