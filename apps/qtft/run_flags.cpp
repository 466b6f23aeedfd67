#include "run_flags.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <thread>

#include <CLI/CLI.hpp>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/io/atomic_file.h"
#include "qtft/memory/device_settings.h"

namespace qtft::cli {

void RuntimeFlags::apply() const {
  if (threads < 0) throw UsageError("--threads must not be negative");
  // More threads than cores make LibTorch's OpenMP spin against itself (75x slower seen).
  const auto cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores > 0 && threads > cores) {
    throw UsageError("--threads " + std::to_string(threads) + " is more than this machine's " + std::to_string(cores) +
                     " cores");
  }
  if (threads > 0) at::set_num_threads(threads);
  if (deterministic) memory::use_deterministic_algorithms();
}

c10::Device RuntimeFlags::resolve_device() const {
  const c10::Device resolved = artifact::resolve_device(device);
  limit_gpu_memory(resolved);
  return resolved;
}

Precision RuntimeFlags::precision_or(Precision otherwise) const {
  return precision.empty() ? otherwise : parse_precision(precision);
}

void RuntimeFlags::limit_gpu_memory(c10::Device device) const {
  if (gpu_memory_limit.empty()) return;
  memory::set_gpu_memory_limit(device, parse_byte_size(gpu_memory_limit, "--gpu-memory-limit"));
}

void add_model_flags(CLI::App& cmd, ModelFlags& f) {
  cmd.add_option("--hidden-size", f.hidden_size, "Width of every hidden layer")->capture_default_str();
  cmd.add_option("--variable-hidden-size", f.variable_hidden_size,
                 "Width of each time-varying input's embedding and GRN, projected to --hidden-size after "
                 "selection (0: the hidden size below 32 inputs, else 16 or the hidden size if smaller)")
      ->capture_default_str();
  cmd.add_option("--attention-heads", f.attention_heads, "Attention heads (must divide --hidden-size)")
      ->capture_default_str();
  cmd.add_option("--lstm-layers", f.lstm_layers, "Layers of the LSTM encoder and decoder")->capture_default_str();
  cmd.add_option("--dropout", f.dropout, "Dropout rate")->capture_default_str();
  cmd.add_option("--quantiles", f.quantiles, "Forecast quantiles, comma-separated (must include 0.5)")
      ->delimiter(',')
      ->capture_default_str();
}

void add_qat_flags(CLI::App& cmd, QatFlags& f) {
  cmd.add_flag("--use-qat", f.use_qat, "Quantization-aware training: fake-quantized weights and activations");
  cmd.add_option("--qat-calibration-batches", f.calibration_batches,
                 "Batches run without gradients to calibrate new observers before training")
      ->capture_default_str();
  cmd.add_flag("--freeze-qat-observers", f.freeze_observers,
               "Freeze every observer (scale and zero point fixed) from the start of training");
  cmd.add_option("--weight-bits", f.weight_bits, "Weight bit width: 8 or 4")->capture_default_str();
  cmd.add_option("--activation-bits", f.activation_bits, kActivationBitsHelp)->capture_default_str();
  cmd.add_flag("--verbose", f.verbose, "List every observer, not only the widest ranges");
  cmd.add_flag("--two-phase", f.two_phase,
               "The QAT recipe in one run: train FP32 (or --load-model it), quantize it, calibrate on the trained "
               "model, fine-tune with live observers, freeze, continue");
  cmd.add_option("--qat-start", f.start_name,
                 "Where --two-phase and --compare-accuracy start QAT: fp32 (a trained FP32 model) or scratch (a "
                 "fresh QAT model)")
      ->check(CLI::IsMember({"fp32", "scratch"}))
      ->capture_default_str();
  cmd.add_option("--qat-epochs", f.qat_epochs,
                 "From FP32: the epochs of --epochs that fine-tune with QAT (default: a quarter, at least 1)");
  cmd.add_option("--qat-lr-scale", f.fine_tune_lr_scale,
                 "From FP32: the QAT fine-tuning's learning rate as a fraction of --learning-rate")
      ->capture_default_str();
  cmd.add_option("--qat-live-epochs", f.live_epochs,
                 "With --two-phase: epochs with live observers before they freeze, a fraction counting steps "
                 "(default: from FP32, half the QAT epochs; from scratch, 1)");
  cmd.add_flag("--compare-accuracy", f.compare_accuracy,
               "Train FP32, derive PTQ, train QAT frozen (two-phase) and QAT live with the same epoch budget; print "
               "and save the comparison");
}

void add_runtime_flags(CLI::App& cmd, RuntimeFlags& f) {
  cmd.add_option("--device", f.device, "cpu, cuda or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  cmd.add_option("--threads", f.threads, "CPU threads for LibTorch (0: its default)")->capture_default_str();
  cmd.add_flag(
      "--deterministic", f.deterministic,
      "Deterministic algorithms on the GPU (LibTorch's deterministic mode, cuDNN without autotuning and TF32, a "
      "fixed cuBLAS workspace): the same bits run after run; nothing changes on the CPU");
  cmd.add_option("--gpu-memory-limit", f.gpu_memory_limit,
                 "Cap the CUDA caching allocator at this size (e.g. 4GiB), so that a large GPU runs out where a "
                 "smaller card would");
}

void add_precision_flag(CLI::App& cmd, RuntimeFlags& f) {
  cmd.add_option("--precision", f.precision,
                 "Matrix products in fp32, or in bf16 with FP32 weights, optimizer and norms (needs avx512_bf16 or "
                 "amx_bf16 on a CPU); default fp32, or the resumed run's")
      ->check(CLI::IsMember({"fp32", "bf16"}));
}

void add_training_flags(CLI::App& cmd, train::TrainOptions& o, std::string& lr_schedule) {
  cmd.add_option("--epochs", o.epochs, "Epochs to train (in all, when resuming)")->capture_default_str();
  cmd.add_option("--batch-size", o.batch_size, "Windows per batch")->capture_default_str();
  cmd.add_option("--eval-batch-size", o.eval_batch_size,
                 "Windows per forward pass when validating: memory, not what is learned")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--learning-rate", o.learning_rate, "Adam learning rate")->capture_default_str();
  cmd.add_option("--weight-decay", o.weight_decay, "Adam weight decay (L2)")->capture_default_str();
  cmd.add_option("--clip-norm", o.clip_norm, "Clip gradients to this global norm (0: off)")->capture_default_str();
  cmd.add_option("--lr-schedule", lr_schedule, "none, plateau (halve after 2 epochs without improvement) or cosine")
      ->check(CLI::IsMember({"none", "plateau", "cosine"}))
      ->capture_default_str();
  cmd.add_option("--patience", o.patience, "Stop after this many epochs without improvement (0: never)")
      ->capture_default_str();
  cmd.add_option("--seed", o.seed, "Seed for initialization, batch order and dropout")->capture_default_str();
  cmd.add_option("--max-batches-per-epoch", o.max_batches_per_epoch, "Cap on batches per epoch (0: all)")
      ->capture_default_str();
}

void add_checkpoint_flags(CLI::App& cmd, CheckpointFlags& f) {
  cmd.add_flag("--use-gradient-checkpointing", f.use,
               "Recompute activations in the backward pass instead of keeping them: less memory, the same "
               "numbers bit for bit (QAT observers live or frozen)");
  cmd.add_option("--checkpoint-policy", f.policy,
                 "With --use-gradient-checkpointing: blocks (each TFT block), lstm (blocks, and the encoder LSTM "
                 "per time chunk) or auto (measure, then the least recomputation that fits --memory-budget); "
                 "default blocks");
  cmd.add_option("--memory-budget", f.memory_budget,
                 "With --checkpoint-policy auto: the step's peak to fit, e.g. 4GiB");
}

void CheckpointFlags::apply_to(train::TrainOptions& options) const {
  // Given without --use-gradient-checkpointing, a policy (even the default's name) is a
  // usage error rather than silently ignored: the user meant something by it.
  const auto policy_value = memory::parse_checkpoint_policy(policy.empty() ? "blocks" : policy);
  if (!use) {
    if (!policy.empty() || !memory_budget.empty()) {
      throw UsageError("--checkpoint-policy and --memory-budget need --use-gradient-checkpointing");
    }
    options.checkpoint_policy = memory::CheckpointPolicy::None;
    options.memory_budget_bytes = 0;
    return;
  }
  if (policy_value == memory::CheckpointPolicy::None) {
    throw UsageError("--checkpoint-policy none contradicts --use-gradient-checkpointing; drop one of them");
  }
  options.checkpoint_policy = policy_value;
  options.memory_budget_bytes = memory_budget.empty() ? 0 : parse_byte_size(memory_budget, "--memory-budget");
  options.validate();
}

const CLI::Validator& writable_file() {
  static const CLI::Validator validator(
      [](std::string& path) -> std::string {
        try {
          io::check_writable(path, "");
        } catch (const Error& e) {
          return e.what();
        }
        return {};
      },
      "FILE");
  return validator;
}

bool stdout_is_terminal() { return ::isatty(STDOUT_FILENO) == 1; }

}  // namespace qtft::cli
