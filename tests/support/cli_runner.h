#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "support/temp_dir.h"

namespace qtft::test {

// The qtft binary run as a user would: exit code, stdout and stderr apart.
struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A prefix for run_qtft that kills a run still going after 300 s (exit 137): a bound that
// only catches a hang, however loaded the machine, instead of timing the command.
inline const std::string kHangGuard = "timeout -s KILL 300";

// The subcommands that take --device (apps/qtft: add_runtime_flags, which train_flags.cpp and
// model_run.cpp add too). Cli.DeviceFlagIsTakenByTheCommandsPinnedToTheCpu checks the list
// against each command's --help.
inline bool takes_device_flag(const std::string& command) {
  static const std::set<std::string> commands{"backtest", "evaluate", "explain", "forecast", "memory-report", "predict",
                                              "quantize", "report",   "train",   "tune",     "watch"};
  return commands.count(command) > 0;
}

// `args` (a subcommand, then its flags) with --device cpu added when the subcommand takes it
// and `args` names no device itself. The suite's expectations are the CPU's (bitwise files,
// the integer products of int8 files), and the CLI's default, auto, picks a GPU where there
// is one; a test about the device names it.
inline std::string on_the_cpu(const std::string& args) {
  const auto start = args.find_first_not_of(' ');
  if (start == std::string::npos) return args;
  const std::string command = args.substr(start, args.find(' ', start) - start);
  if (!takes_device_flag(command) || args.find("--device") != std::string::npos) return args;
  return args + " --device cpu";
}

// `prefix` goes before the binary (e.g. "timeout -s INT 3"); outputs land in `dir`. Commands
// that take --device run on the CPU unless `args` names a device (on_the_cpu).
inline CliRun run_qtft(const TempDir& dir, const std::string& args, const std::string& prefix = "") {
  auto out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  std::string command =
      prefix + " '" + std::string(QTFT_CLI_PATH) + "' " + on_the_cpu(args) + " >'" + out + "' 2>'" + err + "'";
  int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text(out);
  run.err = read_text(err);
  return run;
}

}  // namespace qtft::test
