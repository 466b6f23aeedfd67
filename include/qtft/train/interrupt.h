#pragma once

namespace qtft::train {

// Ctrl-C (SIGINT) and SIGTERM during training set a flag instead of killing the process:
// the trainer finishes the current step, saves a resumable checkpoint and returns. A
// second Ctrl-C kills the process the usual way.
void install_interrupt_handler();
bool interrupt_requested();
void clear_interrupt();  // for tests
void request_interrupt();  // what the handler does; for tests

}  // namespace qtft::train
