// Memory of one QAT training step (live observers) under each checkpoint policy, against
// no checkpointing, measured in the same run for the TFT paper's electricity-sized
// configuration and a small one. Prints the configuration and a table per configuration,
// and writes JSON. With --rounds N every policy is measured N times, the policies one after
// the other in each round, and the step time is the median over the rounds: the VM's slow
// and fast spells last seconds, and so fall on every policy alike.
//   build/bench/memory_report_bench [--config paper|small|all] [--threads N] [--timed-steps 3]
//                                   [--rounds 1] [--device cpu|cuda|auto] [--json-out out.json]
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qtft/artifact/model_loading.h"
#include "qtft/data/features/batch.h"
#include "qtft/io/atomic_file.h"
#include "qtft/memory/memory_tracker.h"
#include "qtft/model/model_building.h"
#include "qtft/train/step_memory.h"
#include "qtft/train/train_step.h"

#include "bench_configs.h"

namespace {

using qtft::memory::CheckpointPolicy;

nlohmann::json measure(const qtft::bench::TftConfig& c, int timed_steps, int rounds, c10::Device device) {
  auto dataset = qtft::bench::dataset_for(c);
  qtft::model::TftOptions options = qtft::model::model_options_for(dataset);
  options.hidden_size(c.hidden).attention_heads(c.heads).use_qat(true);  // observers live: never frozen here
  qtft::train::TrainOptions train;
  train.batch_size = static_cast<size_t>(c.batch);
  train.seed = 1;
  auto batch = qtft::train::first_training_batch(dataset, train);
  const int64_t parameters = qtft::model::count_parameters(*qtft::model::TemporalFusionTransformer(options));

  std::printf(
      "\n%s: encoder %lld, horizon %lld, hidden %lld, heads %lld, batch %lld, %lld parameters, QAT 8/8-bit "
      "live observers, device %s\n",
      c.name, static_cast<long long>(c.encoder), static_cast<long long>(c.horizon), static_cast<long long>(c.hidden),
      static_cast<long long>(c.heads), static_cast<long long>(c.batch), static_cast<long long>(parameters),
      device.str().c_str());
  std::fflush(stdout);
  auto step = [&](CheckpointPolicy policy) {
    return qtft::train::measure_training_step(options, train.seed, batch, train, policy, device, timed_steps);
  };
  // Every round measures each policy once; memory is the same in every round, the step
  // time is the median over the rounds.
  const CheckpointPolicy all[] = {CheckpointPolicy::None, CheckpointPolicy::Blocks, CheckpointPolicy::Lstm};
  std::map<CheckpointPolicy, qtft::train::StepMemory> measured;
  std::map<CheckpointPolicy, std::vector<double>> seconds;
  for (int r = 0; r < rounds; ++r) {
    for (auto policy : all) {
      measured[policy] = step(policy);
      seconds[policy].push_back(measured[policy].step_seconds);
    }
    if (rounds > 1) {
      std::printf("round %d: step time none %.2f s, blocks %.2f s (%.2fx), lstm %.2f s (%.2fx)\n", r + 1,
                  seconds[all[0]].back(), seconds[all[1]].back(), seconds[all[1]].back() / seconds[all[0]].back(),
                  seconds[all[2]].back(), seconds[all[2]].back() / seconds[all[0]].back());
    }
  }
  for (auto policy : all) {
    std::vector<double>& v = seconds[policy];
    std::sort(v.begin(), v.end());
    const size_t mid = v.size() / 2;
    measured[policy].step_seconds = v.size() % 2 == 1 ? v[mid] : (v[mid - 1] + v[mid]) / 2.0;
  }
  // The `none` measurement is the without column of every policy's report.
  const auto none = measured[CheckpointPolicy::None];
  nlohmann::json policies = nlohmann::json::object();
  for (auto policy : {CheckpointPolicy::Blocks, CheckpointPolicy::Lstm}) {
    qtft::train::MemoryReport report{policy, none, measured[policy]};
    std::printf("\n%s", qtft::train::format_memory_report(report).c_str());
    std::fflush(stdout);
    auto j = qtft::train::to_json(report);
    j.erase("without");  // the shared `none` column, stored once
    policies[qtft::memory::checkpoint_policy_name(policy)] = j;
  }
  return {{"config", c.name},           {"encoder_length", c.encoder},
          {"horizon", c.horizon},       {"hidden_size", c.hidden},
          {"attention_heads", c.heads}, {"batch_size", c.batch},
          {"parameters", parameters},   {"use_qat", true},
          {"observers_frozen", false},  {"none", qtft::train::to_json(none)},
          {"policies", policies}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Training-step memory under each checkpoint policy, with QAT"};
  std::string config = "all", device_name = "auto", json_path;
  int threads = 0, timed_steps = 3, rounds = 1;
  app.add_option("--config", config, "paper, small or all")
      ->check(CLI::IsMember({"paper", "small", "all"}))
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: LibTorch default)")->capture_default_str();
  app.add_option("--timed-steps", timed_steps, "Timed steps per policy (the median is reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rounds", rounds, "Rounds of every policy, one after the other (the median step time is reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--device", device_name, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--json-out", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  qtft::memory::install_cpu_memory_tracking();  // before any tensor, so every one is seen
  if (threads > 0) at::set_num_threads(threads);
  auto device = qtft::artifact::resolve_device(device_name);

  const qtft::bench::TftConfig configs[] = {qtft::bench::kPaperConfig, qtft::bench::kSmallConfig};
  std::printf(
      "device %s, %d CPU threads, step time: median of %d steps after a warm-up and a measured step, median of %d "
      "rounds\n",
      device.str().c_str(), at::get_num_threads(), timed_steps, rounds);
  nlohmann::json results = nlohmann::json::array();
  for (const auto& c : configs) {
    if (config != "all" && config != c.name) continue;
    results.push_back(measure(c, timed_steps, rounds, device));
  }
  nlohmann::json j{{"device", device.str()},
                   {"threads", at::get_num_threads()},
                   {"timed_steps", timed_steps},
                   {"rounds", rounds},
                   {"results", results}};
  if (!json_path.empty()) {
    qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
    std::printf("\nwrote %s\n", json_path.c_str());
  }
  return 0;
}
