#pragma once

#include <chrono>
#include <cstdint>

namespace qtft::cli {

// The command line qtft was started with, kept for `train --nproc` to start its workers.
void remember_command_line(int argc, char** argv);

// Runs this very command line, less its --nproc, as `workers` local data-parallel workers
// (dist::run_local_workers) and returns their exit code. Each worker gets an equal share of
// the cores unless --threads or OMP_NUM_THREADS says otherwise; `grace` is how long the
// others may take to end on their own after one fails.
int run_as_local_workers(int64_t workers, std::chrono::milliseconds grace);

// In a worker that run_as_local_workers started: should the launcher die (killed, its
// terminal closed), this process gets SIGUSR1, which asks it to stop as a Ctrl-C does, so
// rank 0 still saves a resumable checkpoint. Does nothing in other processes.
void stop_when_the_launcher_dies();

}  // namespace qtft::cli
