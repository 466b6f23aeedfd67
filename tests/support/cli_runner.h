#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
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

// `prefix` goes before the binary (e.g. "timeout -s INT 3"); outputs land in `dir`.
inline CliRun run_qtft(const TempDir& dir, const std::string& args, const std::string& prefix = "") {
  auto out = dir.file("stdout.txt"), err = dir.file("stderr.txt");
  std::string command = prefix + " '" + std::string(QTFT_CLI_PATH) + "' " + args + " >'" + out + "' 2>'" + err + "'";
  int status = std::system(command.c_str());
  CliRun run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = read_text(out);
  run.err = read_text(err);
  return run;
}

}  // namespace qtft::test
