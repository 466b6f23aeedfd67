#pragma once

namespace qtft::cli {

// Thrown by a command whose result is an exit status rather than an error (`qtft diff`
// exits 1 when files differ, like diff(1)): main returns `code` and prints nothing more.
// Not derived from std::exception, so no error handler mistakes it for a failure.
struct ExitCode {
  int code = 0;
};

}  // namespace qtft::cli
