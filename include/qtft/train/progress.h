#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "qtft/eval/metrics.h"

namespace qtft::train {

struct EpochSummary {
  int64_t epoch = 0;  // 1-based
  int64_t epochs = 0;
  double train_loss = 0.0;
  eval::ForecastMetrics val;
  double learning_rate = 0.0;
  double seconds = 0.0;
  double samples_per_second = 0.0;
  bool improved = false;
  // The highest memory one training step of the epoch held (weights, gradients, optimizer
  // state, observers, the batch and activations), measured; -1 when not tracked (CPU without
  // memory::install_cpu_memory_tracking). The second figure is the step without
  // checkpointing, when it was measured (--checkpoint-policy auto), else -1.
  int64_t peak_memory_bytes = -1;
  int64_t peak_memory_without_checkpointing_bytes = -1;
  // Collective operations per training step across ranks (gradient buckets, the step's end,
  // and with Immediate observers one per observer and forward); 0 alone.
  double collectives_per_step = 0.0;
};

// Where the trainer reports what it is doing. The console reporter draws a live bar on a
// terminal and writes plain log lines otherwise (CI logs, pipes).
class ProgressReporter {
 public:
  virtual ~ProgressReporter() = default;
  virtual void epoch_started(int64_t /*epoch*/, int64_t /*epochs*/, size_t /*batches*/) {}
  virtual void batch_done(size_t /*done*/, size_t /*total*/, double /*loss*/, double /*samples_per_s*/,
                          double /*eta_s*/) {}
  virtual void epoch_finished(const EpochSummary& /*summary*/) {}
  // A line about the run worth telling the user (such as the checkpoint policy chosen).
  virtual void note(const std::string& /*line*/) {}
};

std::unique_ptr<ProgressReporter> make_console_progress(std::FILE* out, bool terminal);

// One line per epoch, shared by the console reporter and anything else that prints epochs.
std::string format_epoch_line(const EpochSummary& summary);

}  // namespace qtft::train
