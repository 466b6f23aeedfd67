// The torch test binary's main: like a program that embeds qtft, it installs the tracking
// CPU allocator first thing, before any tensor or oneDNN buffer exists (the library never
// installs it on its own), then runs the tests.
#include <gtest/gtest.h>

#include "qtft/memory/memory_tracker.h"

int main(int argc, char** argv) {
  qtft::memory::install_cpu_memory_tracking();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
