#pragma once

namespace qtft::cli {

// The program's Ctrl-C (SIGINT) and SIGTERM: the first sets a flag that the running
// command polls (a Trainer's stop callback), so training finishes the current step, saves
// a resumable checkpoint and exits; a second one kills the process the usual way. The
// library never installs signal handlers; this is the qtft program's choice.
void install_interrupt_handler();
bool interrupt_requested();

// `signal` becomes a plain stop request, like a first Ctrl-C, however often it comes (a
// launcher's death may be signalled more than once).
void treat_as_stop_request(int signal);

// For a process that only launches workers (train --nproc): each SIGINT or SIGTERM is
// counted, nothing more; the launcher passes every one on to the workers, which act on it
// as above (the first stops and saves, a second ends them).
void install_interrupt_counter();
int interrupts_received();

// For its lifetime (a file being saved), a second signal does not end the process at
// once: it does so when the save is complete. (A signal mask would not do: LibTorch's
// worker threads would still take the signal.)
class SignalsHeld {
 public:
  SignalsHeld();
  ~SignalsHeld();
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;
};

}  // namespace qtft::cli
