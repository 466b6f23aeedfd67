#pragma once

#include <string>

#include "qtft/common/error.h"

namespace qtft::test {

// The message of the `E` that `f` throws, or "" when it throws none (another exception
// escapes, failing the test).
template <class E = Error, class F>
std::string message_thrown(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

}  // namespace qtft::test
