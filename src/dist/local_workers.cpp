#include "qtft/dist/local_workers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <thread>

#include "qtft/common/error.h"

extern char** environ;

namespace qtft::dist {
namespace {

using Clock = std::chrono::steady_clock;

// The launcher's environment without any data-parallel variables of its own, plus the
// worker's.
std::vector<std::string> worker_environment(const LocalWorkersOptions& options, int64_t rank, int port) {
  static const std::vector<std::string> kOurs = {"RANK",
                                                 "LOCAL_RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_WORLD_SIZE",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "TORCHELASTIC_USE_AGENT_STORE",
                                                 kLauncherPidVariable};
  std::vector<std::string> env;
  bool threads_set = false;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (std::find(kOurs.begin(), kOurs.end(), name) != kOurs.end()) continue;
    threads_set = threads_set || name == "OMP_NUM_THREADS";
    env.push_back(entry);
  }
  const std::string workers = std::to_string(options.workers);
  env.push_back("RANK=" + std::to_string(rank));
  env.push_back("LOCAL_RANK=" + std::to_string(rank));
  env.push_back("WORLD_SIZE=" + workers);
  env.push_back("LOCAL_WORLD_SIZE=" + workers);
  env.push_back("MASTER_ADDR=127.0.0.1");
  env.push_back("MASTER_PORT=" + std::to_string(port));
  env.push_back(std::string(kLauncherPidVariable) + "=" + std::to_string(::getpid()));
  if (!threads_set && options.threads_per_worker > 0) {
    env.push_back("OMP_NUM_THREADS=" + std::to_string(options.threads_per_worker));
  }
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

pid_t spawn_worker(const LocalWorkersOptions& options, int64_t rank, int port) {
  std::vector<std::string> argv{options.program.string()};
  argv.insert(argv.end(), options.arguments.begin(), options.arguments.end());
  auto env = worker_environment(options, rank, port);
  auto c_argv = c_strings(argv);
  auto c_env = c_strings(env);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // A process group of its own: the terminal's Ctrl-C goes to the launcher, which passes
  // it on once, instead of every worker seeing it twice.
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, c_argv[0], nullptr, &attributes, c_argv.data(), c_env.data());
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    throw Error("--nproc: cannot start worker " + std::to_string(rank) + " (" + options.program.string() +
                "): " + std::strerror(error));
  }
  return pid;
}

struct Worker {
  int64_t rank = 0;
  pid_t pid = 0;
  std::optional<int> exit_code;  // set once it has ended
};

// Exit code as a shell reports it: 128 + the signal for a worker a signal ended. Reported
// unless it is the 130 of a worker that stopped because it was asked to.
int exit_code_of(int status, const Worker& w, const LocalWorkersOptions& options, bool interrupted) {
  const std::string who = "worker rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.pid) + ")";
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    if (options.report)
      options.report(who + " was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")");
    return 128 + signal;
  }
  const int code = WEXITSTATUS(status);
  if (code != 0 && !(interrupted && code == 130) && options.report)
    options.report(who + " exited with code " + std::to_string(code));
  return code;
}

void signal_running(const std::vector<Worker>& workers, int signal) {
  for (const auto& w : workers) {
    if (!w.exit_code) ::kill(w.pid, signal);
  }
}

}  // namespace

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error(std::string("looking for a free port: cannot open a socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) throw Error(std::string("cannot find a free port on 127.0.0.1: ") + std::strerror(error));
  return ntohs(address.sin_port);
}

int run_local_workers(const LocalWorkersOptions& options) {
  if (options.workers < 1) throw UsageError("--nproc must be at least 1, got " + std::to_string(options.workers));
  const int port = free_loopback_port();
  std::vector<Worker> workers;
  for (int64_t rank = 0; rank < options.workers; ++rank) {
    try {
      workers.push_back({rank, spawn_worker(options, rank, port), std::nullopt});
    } catch (...) {
      signal_running(workers, SIGKILL);
      for (const auto& w : workers) ::waitpid(w.pid, nullptr, 0);
      throw;
    }
  }
  int interrupts_passed_on = 0;
  std::optional<int> first_failure;
  std::optional<Clock::time_point> failed_at;
  int escalation = 0;  // 0: none yet, 1: SIGTERM sent, 2: SIGKILL sent
  while (std::any_of(workers.begin(), workers.end(), [](const Worker& w) { return !w.exit_code; })) {
    for (auto& w : workers) {
      if (w.exit_code) continue;
      int status = 0;
      const pid_t done = ::waitpid(w.pid, &status, WNOHANG);
      if (done == -1 && errno != EINTR) {
        // Not ours to wait for any more (reaped elsewhere): nothing more can be known of it.
        if (options.report) options.report("worker rank " + std::to_string(w.rank) + ": " + std::strerror(errno));
        w.exit_code = 1;
      } else if (done != w.pid) {
        continue;
      } else {
        w.exit_code = exit_code_of(status, w, options, interrupts_passed_on > 0);
      }
      if (*w.exit_code != 0 && !first_failure) {
        first_failure = *w.exit_code;
        failed_at = Clock::now();
      }
    }
    const int interrupts = options.interrupts_received ? options.interrupts_received() : 0;
    for (; interrupts_passed_on < interrupts; ++interrupts_passed_on) signal_running(workers, SIGINT);
    if (failed_at && escalation < 2 && Clock::now() - *failed_at > options.grace * (escalation + 1)) {
      signal_running(workers, escalation == 0 ? SIGTERM : SIGKILL);
      ++escalation;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return first_failure.value_or(0);
}

}  // namespace qtft::dist
