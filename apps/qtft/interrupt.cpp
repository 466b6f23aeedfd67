#include "interrupt.h"

#include <csignal>

namespace qtft::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;
// While a file is saved, a second signal is remembered instead of ending the process, so
// no half-written temporary is left behind; SignalsHeld acts on it once the file is in place.
volatile std::sig_atomic_t g_holding = 0;
volatile std::sig_atomic_t g_held_signal = 0;

extern "C" void on_signal(int signal) {
  if (g_interrupted) {
    if (g_holding) {
      g_held_signal = signal;
      return;
    }
    // The user insists: restore the default action and let the signal end the process.
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  g_interrupted = 1;
}

extern "C" void on_stop_request(int) { g_interrupted = 1; }

volatile std::sig_atomic_t g_signals_counted = 0;

extern "C" void count_signal(int) { g_signals_counted = g_signals_counted + 1; }

}  // namespace

void treat_as_stop_request(int signal) { std::signal(signal, on_stop_request); }

void install_interrupt_counter() {
  std::signal(SIGINT, count_signal);
  std::signal(SIGTERM, count_signal);
}

int interrupts_received() { return static_cast<int>(g_signals_counted); }

void install_interrupt_handler() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

bool interrupt_requested() { return g_interrupted != 0; }

SignalsHeld::SignalsHeld() { g_holding = 1; }

SignalsHeld::~SignalsHeld() {
  g_holding = 0;
  if (const int signal = g_held_signal) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

}  // namespace qtft::cli
