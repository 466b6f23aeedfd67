#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace qtft::dist {

// Set in each worker's environment to the launcher's pid, so that a worker can tell that
// its launcher has gone (apps/qtft: it then stops and saves, as on Ctrl-C).
inline constexpr const char* kLauncherPidVariable = "QTFT_LAUNCHER_PID";

struct LocalWorkersOptions {
  std::filesystem::path program;       // run `workers` times
  std::vector<std::string> arguments;  // after the program name
  int64_t workers = 2;
  // OMP_NUM_THREADS of each worker when the environment does not set one (0: leave it
  // alone). N workers on C cores should share them, or LibTorch's threads fight.
  int64_t threads_per_worker = 0;
  // After a worker fails, the others have this long to end on their own (their next
  // collective fails) before they are sent SIGTERM, and as long again before SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(30)};
  // How many interrupt signals the launching process has received so far (may be empty).
  // Each new one is passed on to every worker as SIGINT: the first asks them to stop and
  // save, a second ends them, as Ctrl-C does to a single process.
  std::function<int()> interrupts_received;
  // A line about a worker that failed.
  std::function<void(const std::string&)> report;
};

// A port on 127.0.0.1 that nothing listens on now (bound to port 0, then released), for a
// rendezvous store to bind moments later, as torchrun picks its own. Throws qtft::Error.
int free_loopback_port();

// Runs the program as one data-parallel group on this machine, as torchrun would: worker r
// gets RANK=r, LOCAL_RANK=r, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and a free
// MASTER_PORT (rank 0 hosts the rendezvous store), and kLauncherPidVariable. The workers
// run in process groups of their own, so a terminal's Ctrl-C reaches them once, through
// the launcher. Returns the group's exit code: 0 when every worker succeeded, else the
// first failure's (128 + the signal for a worker killed by one). Throws qtft::Error when a
// worker cannot be started.
int run_local_workers(const LocalWorkersOptions& options);

}  // namespace qtft::dist
