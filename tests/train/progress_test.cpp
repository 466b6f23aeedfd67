// The epoch line: fixed fields, then the measured peak memory when there is one.
#include "qtft/train/progress.h"

#include <gtest/gtest.h>

namespace qtft::train {
namespace {

EpochSummary summary() {
  EpochSummary s;
  s.epoch = 2;
  s.epochs = 5;
  s.train_loss = 0.25;
  s.val.loss = 0.5;
  s.learning_rate = 1e-3;
  s.seconds = 1.5;
  s.samples_per_second = 100;
  return s;
}

TEST(EpochLine, LeavesOutMemoryWhenNotTracked) {
  const std::string line = format_epoch_line(summary());
  EXPECT_EQ(line.find("peak_mem"), std::string::npos) << line;
  EXPECT_EQ(line.rfind("100 samples/s"), line.size() - 13) << line;
}

TEST(EpochLine, ReportsThePeakAndTheFigureWithoutCheckpointing) {
  EpochSummary s = summary();
  s.peak_memory_bytes = 3 * 1024 * 1024 + 512 * 1024;  // 3.5 MiB
  s.improved = true;
  EXPECT_NE(format_epoch_line(s).find("100 samples/s  peak_mem=3.5MiB  *best"), std::string::npos);
  s.peak_memory_without_checkpointing_bytes = int64_t{3} * 1024 * 1024 * 1024;
  EXPECT_NE(format_epoch_line(s).find("  peak_mem=3.5MiB (was 3.0GiB)  *best"), std::string::npos)
      << format_epoch_line(s);
}

}  // namespace
}  // namespace qtft::train
