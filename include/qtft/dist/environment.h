#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace qtft::dist {

// Where this process sits in a data-parallel run, from the environment torchrun sets:
// RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
struct DistributedEnvironment {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  std::string master_addr;
  int64_t master_port = 0;
  // Under torchrun the launcher hosts the rendezvous store itself
  // (TORCHELASTIC_USE_AGENT_STORE=True), so rank 0 connects to it as a client too.
  bool launcher_hosts_store = false;
};

using GetEnv = std::function<std::optional<std::string>(const std::string& name)>;
// The process's own environment.
std::optional<std::string> process_environment(const std::string& name);

// nullopt when WORLD_SIZE is unset (a single process). Otherwise every variable must be
// present and valid: a rank in [0, WORLD_SIZE), a port in [1, 65535]; throws qtft::UsageError
// naming the variable and its value.
std::optional<DistributedEnvironment> distributed_environment(const GetEnv& get = process_environment);

}  // namespace qtft::dist
