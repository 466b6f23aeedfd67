#include "training_printer.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "qtft/common/format.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/memory/device_settings.h"

namespace qtft::cli {

void print_config(const model::TftOptions& m, const train::TrainOptions& t, int64_t parameters, c10::Device device) {
  std::string q;
  for (double v : m.quantiles()) q += (q.empty() ? "" : ",") + std::to_string(v).substr(0, 4);
  const std::string inputs_width =
      m.variable_width() == m.hidden_size() ? "" : " (inputs at " + std::to_string(m.variable_width()) + ")";
  std::printf("Model: TFT hidden %lld%s, heads %lld, lstm layers %lld, dropout %.2f, quantiles %s; %lld parameters\n",
              static_cast<long long>(m.hidden_size()), inputs_width.c_str(),
              static_cast<long long>(m.attention_heads()), static_cast<long long>(m.lstm_layers()), m.dropout(),
              q.c_str(), static_cast<long long>(parameters));
  std::printf(
      "Training: %lld epochs, batch %zu, Adam lr %g, weight decay %g, clip %g, schedule %s, patience %lld, "
      "seed %llu, device %s\n",
      static_cast<long long>(t.epochs), t.batch_size, t.learning_rate, t.weight_decay, t.clip_norm,
      train::lr_schedule_name(t.lr_schedule), static_cast<long long>(t.patience),
      static_cast<unsigned long long>(t.seed), memory::describe_device(device).c_str());
  if (t.checkpoint_policy != memory::CheckpointPolicy::None) {
    std::string what = "the same numbers as without, bit for bit; less memory, more time";
    if (t.checkpoint_policy == memory::CheckpointPolicy::Auto) {
      what = std::string("the least recomputation whose step fits ")
                 .append(format_bytes(static_cast<uint64_t>(t.memory_budget_bytes)));
    }
    std::printf("Activation checkpointing: %s (%s)\n", memory::checkpoint_policy_name(t.checkpoint_policy),
                what.c_str());
  }
  if (m.use_qat()) {
    std::printf(
        "QAT: weights %lld-bit per channel (symmetric), activations %lld-bit per tensor (moving-average "
        "observers, constant %g)\n",
        static_cast<long long>(m.weight_bits()), static_cast<long long>(m.activation_bits()), m.observer_averaging());
  }
}

void print_interrupted(const train::TrainingOutcome& outcome) {
  const auto& state = outcome.state;
  const std::string path = outcome.saved_to.string();
  std::fprintf(stderr,
               "\nqtft: interrupted after epoch %lld, batch %lld: saved a resumable checkpoint to %s\n"
               "continue with: qtft train --resume --load-model %s\n"
               "(the data, the %lld epochs and the save path come from the checkpoint; flags given override them)\n",
               static_cast<long long>(state.epochs_completed), static_cast<long long>(state.batches_done_in_epoch),
               path.c_str(), path.c_str(), static_cast<long long>(outcome.train.epochs));
  if (outcome.ranks > 1) {
    const auto n = static_cast<long long>(outcome.ranks);
    std::fprintf(stderr,
                 "(on %lld ranks, as this run: add --nproc %lld, or launch it with torchrun --nproc-per-node "
                 "%lld --no-python)\n",
                 n, n, n);
  }
}

void print_summary(const train::TrainingOutcome& outcome) {
  const auto& result = outcome.result;
  const auto& best = result.best_val;
  const double baseline = outcome.baselines.best().loss;
  std::printf(
      "Summary: best epoch %lld of %lld%s; validation loss %.5f vs best naive baseline %.5f (%s): %s by %.1f%%; "
      "RMSE %.5f, MAE %.5f, P50 %.4f, P90 %.4f; %lld parameters; %.1f s\n",
      static_cast<long long>(result.best_epoch), static_cast<long long>(result.epochs_completed),
      result.stopped_early ? " (stopped early)" : "", best.loss, baseline, outcome.baselines.best_name().c_str(),
      best.loss < baseline ? "better" : "WORSE", 100.0 * std::abs(baseline - best.loss) / baseline, best.rmse, best.mae,
      best.p50, best.p90, static_cast<long long>(outcome.parameters), result.train_seconds);
  const auto& units = best.in_target_units;
  if (std::isfinite(units.loss)) {
    std::printf("  in the target's units (before scaling): validation loss %.6g, RMSE %.6g, MAE %.6g\n", units.loss,
                units.rmse, units.mae);
  }
}

}  // namespace qtft::cli
