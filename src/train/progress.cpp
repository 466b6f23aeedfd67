#include "qtft/train/progress.h"

#include <algorithm>
#include <cmath>

#include "qtft/common/format.h"

namespace qtft::train {
namespace {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  char buf[32];
  auto s = static_cast<long long>(seconds + 0.5);
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  return buf;
}

class ConsoleProgress : public ProgressReporter {
 public:
  ConsoleProgress(std::FILE* out, bool terminal) : out_(out), terminal_(terminal) {}

  void epoch_started(int64_t epoch, int64_t epochs, size_t batches) override {
    epoch_ = epoch;
    epochs_ = epochs;
    // Without a terminal, about ten lines per epoch keep logs readable.
    log_every_ = std::max<size_t>(1, batches / 10);
  }

  void batch_done(size_t done, size_t total, double loss, double samples_per_s, double eta_s) override {
    if (terminal_) {
      constexpr int kWidth = 28;
      int filled = total ? static_cast<int>(kWidth * done / total) : kWidth;
      std::string bar(static_cast<size_t>(filled), '#');
      bar.resize(kWidth, '.');
      std::fprintf(out_, "\r  epoch %lld/%lld [%s] %zu/%zu loss %.4f %.0f samples/s eta %s   ",
                   static_cast<long long>(epoch_), static_cast<long long>(epochs_), bar.c_str(), done, total, loss,
                   samples_per_s, format_duration(eta_s).c_str());
      std::fflush(out_);
    } else if (done % log_every_ == 0 || done == total) {
      std::fprintf(out_, "  epoch %lld/%lld batch %zu/%zu loss %.4f %.0f samples/s eta %s\n",
                   static_cast<long long>(epoch_), static_cast<long long>(epochs_), done, total, loss, samples_per_s,
                   format_duration(eta_s).c_str());
      std::fflush(out_);
    }
  }

  void epoch_finished(const EpochSummary& s) override {
    if (terminal_) std::fprintf(out_, "\r\033[K");
    std::fprintf(out_, "%s\n", format_epoch_line(s).c_str());
    std::fflush(out_);
  }

  void note(const std::string& line) override {
    if (terminal_) std::fprintf(out_, "\r\033[K");
    std::fprintf(out_, "%s\n", line.c_str());
    std::fflush(out_);
  }

 private:
  std::FILE* out_;
  bool terminal_;
  int64_t epoch_ = 0, epochs_ = 0;
  size_t log_every_ = 1;
};

}  // namespace

namespace {

// "2.8GiB": one token, so the epoch line stays easy to split.
std::string compact_bytes(int64_t bytes) {
  std::string text = format_bytes(static_cast<uint64_t>(bytes));
  text.erase(std::remove(text.begin(), text.end(), ' '), text.end());
  return text;
}

}  // namespace

std::string format_epoch_line(const EpochSummary& s) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "epoch %lld/%lld  train_loss %.5f  val_loss %.5f  val_rmse %.5f  val_mae %.5f  P50 %.4f  P90 %.4f  "
                "lr %.2e  %.1fs  %.0f samples/s",
                static_cast<long long>(s.epoch), static_cast<long long>(s.epochs), s.train_loss, s.val.loss, s.val.rmse,
                s.val.mae, s.val.p50, s.val.p90, s.learning_rate, s.seconds, s.samples_per_second);
  std::string line = buf;
  if (s.peak_memory_bytes >= 0) {
    line += "  peak_mem=" + compact_bytes(s.peak_memory_bytes);
    if (s.peak_memory_without_checkpointing_bytes >= 0) {
      line += " (was " + compact_bytes(s.peak_memory_without_checkpointing_bytes) + ")";
    }
  }
  if (s.improved) line += "  *best";
  return line;
}

std::unique_ptr<ProgressReporter> make_console_progress(std::FILE* out, bool terminal) {
  return std::make_unique<ConsoleProgress>(out, terminal);
}

}  // namespace qtft::train
