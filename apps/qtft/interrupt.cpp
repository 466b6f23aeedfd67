#include "interrupt.h"

#include <csignal>

namespace qtft::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_signal(int signal) {
  if (g_interrupted) {
    // The user insists: restore the default action and let the signal end the process.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_interrupted = 1;
}

}  // namespace

void install_interrupt_handler() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() { return g_interrupted != 0; }

}  // namespace qtft::cli
