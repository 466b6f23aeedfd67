#pragma once

// Data-parallel tests run their ranks as threads of the test process, on loopback.
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "qtft/dist/environment.h"
#include "qtft/dist/local_workers.h"

namespace qtft::test {

// A loopback port nothing listens on now.
inline int64_t free_port() { return dist::free_loopback_port(); }

// Rank `rank` of `world_size` with the store at 127.0.0.1:port.
inline dist::DistributedEnvironment loopback_rank(int64_t rank, int64_t world_size, int64_t port) {
  dist::DistributedEnvironment e;
  e.rank = e.local_rank = rank;
  e.world_size = world_size;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  return e;
}

// Runs rank_main(rank, port) for every rank at once, rank 0 on this thread; returns each
// rank's exception message ("" when it finished).
inline std::vector<std::string> run_loopback_ranks(int64_t world_size,
                                                   const std::function<void(int64_t rank, int64_t port)>& rank_main) {
  const int64_t port = free_port();
  std::vector<std::string> errors(static_cast<size_t>(world_size));
  auto guarded = [&](int64_t rank) {
    try {
      rank_main(rank, port);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  };
  std::vector<std::thread> others;
  for (int64_t rank = 1; rank < world_size; ++rank) others.emplace_back(guarded, rank);
  guarded(0);
  for (auto& t : others) t.join();
  return errors;
}

}  // namespace qtft::test
