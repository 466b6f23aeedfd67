#pragma once

#include <stdexcept>
#include <string>

namespace qtft {

// The one exception type that crosses qtft's API boundary. Its message is meant for a
// person: it names the file, column, row or value at fault, so the CLI prints it as is.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A mistake in how qtft was called (bad flag value, conflicting options). The CLI maps it
// to exit code 2, like a parse error; every other Error exits with 1.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
};

}  // namespace qtft
