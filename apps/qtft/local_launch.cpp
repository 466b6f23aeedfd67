#include "local_launch.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "interrupt.h"
#include "qtft/dist/environment.h"
#include "qtft/dist/local_workers.h"

namespace qtft::cli {
namespace {

std::vector<std::string>& command_line() {
  static std::vector<std::string> arguments;
  return arguments;
}

}  // namespace

void remember_command_line(int argc, char** argv) { command_line().assign(argv + 1, argv + argc); }

int run_as_local_workers(int64_t workers, std::chrono::milliseconds grace) {
  dist::LocalWorkersOptions options;
  // The running binary itself, wherever it was started from.
  options.program = std::filesystem::read_symlink("/proc/self/exe");
  const auto& all = command_line();
  bool threads_given = false;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (all[i].rfind("--nproc=", 0) == 0) continue;
    threads_given = threads_given || all[i] == "--threads" || all[i].rfind("--threads=", 0) == 0;
    options.arguments.push_back(all[i]);
  }
  options.workers = workers;
  const auto cores = static_cast<int64_t>(std::thread::hardware_concurrency());
  if (!threads_given) options.threads_per_worker = std::max<int64_t>(1, cores / workers);
  options.grace = grace;
  options.interrupts_received = interrupts_received;
  options.report = [](const std::string& line) {
    std::fprintf(stderr, "qtft: %s\n", line.c_str());
    std::fflush(stderr);
  };
  return dist::run_local_workers(options);
}

void stop_when_the_launcher_dies() {
  const auto launcher = dist::process_environment(dist::kLauncherPidVariable);
  if (!launcher) return;
  // A signal of its own, which only ever asks to stop: the kernel may send it more than
  // once as the launcher's threads end, and a second SIGTERM would kill.
  treat_as_stop_request(SIGUSR1);
  ::prctl(PR_SET_PDEATHSIG, SIGUSR1);
  // Gone already, before the request above could take effect.
  if (std::to_string(::getppid()) != *launcher) std::raise(SIGUSR1);
}

}  // namespace qtft::cli
