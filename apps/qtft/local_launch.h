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

}  // namespace qtft::cli
