// Where a training step's time goes: LibTorch's (Kineto) profiler over real training steps
// (forward, quantile loss, backward, clipping, Adam) without checkpointing and with a
// policy, measured in the same run. Each operator's time is counted where it is called
// from the step itself (top level on its thread; what it calls inside is part of it), so
// the rows add up to the profiled time. Prints the top operators per policy and JSON.
//   build/bench/profile_step_bench [--config paper|small|wide] [--qat] [--variable-hidden-size H] [--policy
//   blocks|lstm]
//                                  [--precision fp32|bf16] [--steps 2] [--top 25] [--threads N] [--json out.json]
#include <ATen/Parallel.h>
#include <torch/optim/adam.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "bench_configs.h"
#include "op_profile.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/precision.h"
#include "qtft/io/atomic_file.h"
#include "qtft/memory/autocast.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/model/model_building.h"
#include "qtft/train/fused_adam.h"
#include "qtft/train/train_step.h"

namespace {

using qtft::bench::by_time;

nlohmann::json profile(const qtft::bench::TftConfig& c, bool qat, qtft::Precision precision,
                       qtft::memory::CheckpointPolicy policy, int steps, int top, int64_t variable_hidden_size) {
  const bool wide = std::string(c.name) == "wide";
  auto dataset = qtft::bench::dataset_for(wide ? qtft::bench::kSmallConfig : c);
  auto options = wide ? qtft::bench::wide_options(c, qtft::bench::kWideObserved, qtft::bench::kWideKnown)
                      : qtft::model::model_options_for(dataset);
  options.hidden_size(c.hidden).attention_heads(c.heads).use_qat(qat);
  if (variable_hidden_size > 0) options.variable_hidden_size(variable_hidden_size);
  auto model = qtft::model::build_model(options, 1);
  model->set_checkpoint_policy(policy);
  model->set_precision(precision);
  model->train();
  qtft::train::FusedAdam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  qtft::train::TrainOptions train;
  train.batch_size = static_cast<size_t>(c.batch);
  auto batch = wide ? qtft::bench::wide_batch(c, qtft::bench::kWideObserved, qtft::bench::kWideKnown)
                    : qtft::train::first_training_batch(dataset, train);
  const c10::Device cpu(c10::kCPU);
  qtft::train::training_step(model, adam, batch, train.clip_norm, cpu);  // warm-up: Adam state, caches

  qtft::bench::start_op_profile();
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < steps; ++s) qtft::train::training_step(model, adam, batch, train.clip_norm, cpu);
  const double step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / steps;
  const auto times = qtft::bench::stop_op_profile(steps);
  const auto top_level = by_time(times.top_level), self = by_time(times.self);
  const qtft::bench::OpTime step_total = qtft::bench::total(times.top_level);
  const double profiled_ms = step_total.ms;
  const int64_t calls = step_total.calls, all_calls = qtft::bench::total(times.self).calls;
  std::printf(
      "\n%s, %s, %s, checkpointing %s: %.0f ms per step (profiled), %lld operator calls per step (%lld from the "
      "step itself)\n",
      c.name, qat ? "QAT" : "no QAT", qtft::precision_name(precision), qtft::memory::checkpoint_policy_name(policy),
      step_ms, static_cast<long long>(all_calls), static_cast<long long>(calls));
  auto top_rows =
      qtft::bench::print_op_table("operator, called by the step (inclusive)", top_level, profiled_ms, top, "step");
  auto self_rows =
      qtft::bench::print_op_table("operator, self time (callees excluded)", self, profiled_ms, top, "step");
  return {{"config", c.name},
          {"use_qat", qat},
          {"precision", qtft::precision_name(precision)},
          {"policy", qtft::memory::checkpoint_policy_name(policy)},
          {"steps", steps},
          {"step_ms", step_ms},
          {"profiled_ms_per_step", profiled_ms},
          {"top_level_calls_per_step", calls},
          {"operator_calls_per_step", all_calls},
          {"top_level", top_rows},
          {"self", self_rows}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Profile of a TFT training step, without and with checkpointing"};
  std::string config = "paper", policy_name = "blocks", precision_name = "fp32", json_path;
  bool qat = false;
  int steps = 2, top = 25, threads = 0;
  int64_t variable_hidden_size = 0;
  app.add_option("--config", config, "paper, small or wide (W: 200 observed and 20 known inputs, batch 32)")
      ->check(CLI::IsMember({"paper", "small", "wide"}))
      ->capture_default_str();
  app.add_option("--variable-hidden-size", variable_hidden_size,
                 "Width of each input's embedding and GRN (0: the model's default)");
  app.add_flag("--qat", qat, "Quantization-aware training (live observers)");
  app.add_option("--policy", policy_name, "The checkpointing policy profiled against none: blocks or lstm")
      ->check(CLI::IsMember({"blocks", "lstm"}))
      ->capture_default_str();
  app.add_option("--precision", precision_name, "fp32 or bf16 (bf16 products under LibTorch's autocast)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_option("--steps", steps, "Profiled steps per policy (after one warm-up step)")->capture_default_str();
  app.add_option("--top", top, "Operators listed per policy")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: LibTorch default)")->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) at::set_num_threads(threads);
  const qtft::Precision precision = qtft::parse_precision(precision_name);
  qtft::memory::require_precision_support(precision, c10::Device(c10::kCPU));
  const auto& c = config == "paper"  ? qtft::bench::kPaperConfig
                  : config == "wide" ? qtft::bench::kWideConfig
                                     : qtft::bench::kSmallConfig;
  std::printf("CPU, %d threads; %s: encoder %lld, horizon %lld, hidden %lld, heads %lld, batch %lld\n",
              at::get_num_threads(), c.name, static_cast<long long>(c.encoder), static_cast<long long>(c.horizon),
              static_cast<long long>(c.hidden), static_cast<long long>(c.heads), static_cast<long long>(c.batch));
  nlohmann::json results = nlohmann::json::array();
  for (auto policy : {qtft::memory::CheckpointPolicy::None, qtft::memory::parse_checkpoint_policy(policy_name)}) {
    results.push_back(profile(c, qat, precision, policy, steps, top, variable_hidden_size));
  }
  nlohmann::json j{{"threads", at::get_num_threads()}, {"results", results}};
  if (!json_path.empty()) qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
  return 0;
}
