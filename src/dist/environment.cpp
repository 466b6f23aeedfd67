#include "qtft/dist/environment.h"

#include <cstdlib>
#include <limits>

#include "qtft/common/error.h"

namespace qtft::dist {
namespace {

int64_t integer_variable(const GetEnv& get, const std::string& name, int64_t min, int64_t max) {
  const auto value = get(name);
  if (!value) throw UsageError(name + " is not set, but WORLD_SIZE is: a distributed run needs " + name);
  size_t used = 0;
  int64_t parsed = 0;
  try {
    parsed = std::stoll(*value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (value->empty() || used != value->size() || parsed < min || parsed > max) {
    throw UsageError(name + " must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got '" +
                     *value + "'");
  }
  return parsed;
}

}  // namespace

std::optional<std::string> process_environment(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::optional<DistributedEnvironment> distributed_environment(const GetEnv& get) {
  if (!get("WORLD_SIZE")) return std::nullopt;
  DistributedEnvironment e;
  e.world_size = integer_variable(get, "WORLD_SIZE", 1, std::numeric_limits<int32_t>::max());
  e.rank = integer_variable(get, "RANK", 0, e.world_size - 1);
  e.local_rank = integer_variable(get, "LOCAL_RANK", 0, e.world_size - 1);
  const auto addr = get("MASTER_ADDR");
  if (!addr || addr->empty()) throw UsageError("MASTER_ADDR is not set, but WORLD_SIZE is: a distributed run needs it");
  e.master_addr = *addr;
  e.master_port = integer_variable(get, "MASTER_PORT", 1, 65535);
  const auto agent_store = get("TORCHELASTIC_USE_AGENT_STORE");
  e.launcher_hosts_store = agent_store && (*agent_store == "True" || *agent_store == "true" || *agent_store == "1");
  return e;
}

}  // namespace qtft::dist
