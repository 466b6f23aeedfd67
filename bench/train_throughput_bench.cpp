// Training throughput of the TFT: step time (forward, backward, Adam) and samples per
// second for the TFT paper's electricity-sized configuration and a small one, measured in
// the same run; or configuration W (issue 35: the paper's sizes at batch 32 on the columns
// declared with --observed and --known, inputs at --variable-hidden-size). Prints a table
// and JSON. --precision both measures FP32 and bf16 side by side (one model each, the same
// batches) and prints FP32's step time over bf16's; --use-qat trains with live observers.
//   build/bench/train_throughput_bench [--steps 10] [--device cpu|cuda|auto]
//                                      [--precision fp32|bf16|both] [--use-qat]
//                                      [--config paper|small|both|wide|nvidia-electricity]
//                                      [--parquet-file bars.parquet] [--observed COLUMNS] [--known COLUMNS]
//                                      [--variable-hidden-size H] [--json out.json]
// bench/pytorch_forecasting/compare_throughput.sh runs it beside pytorch-forecasting.
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/cpu_features.h"
#include "qtft/common/error.h"
#include "qtft/common/precision.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/batch_order.h"
#include "qtft/eval/quantile_loss.h"
#include "qtft/io/atomic_file.h"
#include "qtft/memory/autocast.h"
#include "qtft/model/model_building.h"
#include "qtft/train/fused_adam.h"

#include "bench_configs.h"

namespace {

void synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

nlohmann::json measure(const qtft::bench::TftConfig& c, int steps, c10::Device device,
                       const qtft::data::BarSource& source, int64_t variable_hidden_size, qtft::Precision precision,
                       bool qat) {
  auto dataset = qtft::bench::dataset_for(c, source);
  qtft::model::TftOptions options = qtft::model::model_options_for(dataset);
  const int64_t time_varying = options.num_observed() + options.num_known();
  options.hidden_size(c.hidden).attention_heads(c.heads);
  options.variable_hidden_size(variable_hidden_size > 0
                                   ? variable_hidden_size
                                   : qtft::model::default_variable_hidden_size(c.hidden, time_varying));
  options.use_qat(qat);
  auto model = qtft::model::build_model(options, 1);
  model->set_precision(precision);
  model->to(device);
  model->train();
  qtft::train::FusedAdam adam(model->parameters(), torch::optim::AdamOptions(1e-3));
  qtft::data::BatchOrder order(dataset.num_windows(qtft::data::Split::Train), static_cast<size_t>(c.batch), 1, true);
  auto indices = order.epoch_order(0);

  const int warmup = 2;
  double total = 0.0;
  for (int s = 0; s < warmup + steps; ++s) {
    std::vector<size_t> ids = indices.slice(static_cast<size_t>(s * c.batch), static_cast<size_t>((s + 1) * c.batch));
    auto batch = qtft::data::make_batch(dataset, qtft::data::Split::Train, ids);
    synchronize(device);
    auto start = std::chrono::steady_clock::now();
    auto out = model->forward(batch.observed.to(device), batch.known.to(device), batch.symbol.to(device),
                              batch.statics.to(device));
    auto loss = qtft::eval::quantile_loss(out.quantiles, batch.target.to(device), options.quantiles());
    adam.zero_grad();
    loss.backward();
    adam.step();
    synchronize(device);
    if (s >= warmup) total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  double step_s = total / steps;
  return {{"config", c.name},
          {"precision", qtft::precision_name(precision)},
          {"qat", qat},
          {"encoder_length", c.encoder},
          {"horizon", c.horizon},
          {"hidden_size", c.hidden},
          {"attention_heads", c.heads},
          {"batch_size", c.batch},
          {"observed_inputs", options.num_observed()},
          {"known_inputs", options.num_known()},
          {"variable_hidden_size", options.variable_width()},
          {"parameters", qtft::model::count_parameters(*model)},
          {"steps", steps},
          {"step_seconds", step_s},
          {"samples_per_second", static_cast<double>(c.batch) / step_s}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"TFT training throughput"};
  int steps = 10;
  std::string device_name = "auto", json_path, config_name = "both";
  qtft::data::BarSource source;
  int threads = 0;
  int64_t variable_hidden_size = 0;
  std::string precision_name = "fp32";
  bool qat = false;
  app.add_option("--steps", steps, "Measured steps per configuration (after 2 warm-up steps)")->capture_default_str();
  app.add_option("--device", device_name, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads (0: LibTorch default)")->capture_default_str();
  app.add_option("--config", config_name,
                 "paper, small, both (paper and small), wide (W) or nvidia-electricity (NVIDIA's TFT's A100 figures)")
      ->check(CLI::IsMember({"paper", "small", "both", "wide", "nvidia-electricity"}))
      ->capture_default_str();
  app.add_option("--parquet-file", source.parquet_file, "Bars to train on (default: the embedded data)")
      ->check(CLI::ExistingFile);
  app.add_option("--observed", source.read.inputs.observed, "Declared observed real columns (names or globs)")
      ->delimiter(',');
  app.add_option("--known", source.read.inputs.known, "Declared known real columns (names or globs)")->delimiter(',');
  app.add_option("--variable-hidden-size", variable_hidden_size,
                 "Width of each time-varying input (0: the model's default for the inputs)")
      ->capture_default_str();
  app.add_option("--precision", precision_name, "fp32, bf16, or both side by side")
      ->check(CLI::IsMember({"fp32", "bf16", "both"}))
      ->capture_default_str();
  app.add_flag("--use-qat", qat, "QAT with live observers (updated in every forward)");
  app.add_option("--json", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) at::set_num_threads(threads);
  auto device = qtft::artifact::resolve_device(device_name);
  std::vector<qtft::Precision> precisions;
  if (precision_name != "bf16") precisions.push_back(qtft::Precision::Fp32);
  if (precision_name != "fp32") precisions.push_back(qtft::Precision::Bf16);
  try {
    for (auto p : precisions) qtft::memory::require_precision_support(p, device);
  } catch (const qtft::UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }

  std::vector<qtft::bench::TftConfig> configs;
  if (config_name == "wide") configs.push_back(qtft::bench::kWideConfig);
  if (config_name == "nvidia-electricity") configs.push_back(qtft::bench::kNvidiaElectricityConfig);
  if (config_name == "paper" || config_name == "both") configs.push_back(qtft::bench::kPaperConfig);
  if (config_name == "small" || config_name == "both") configs.push_back(qtft::bench::kSmallConfig);
  nlohmann::json results = nlohmann::json::array();
  const auto& cpu = qtft::this_cpu_bf16_features();
  std::printf("device %s, %d CPU threads, %d steps each%s; CPU %s (avx512_bf16 %s, amx_bf16 %s)\n",
              device.str().c_str(), at::get_num_threads(), steps, qat ? ", QAT live" : "", cpu.cpu_name.c_str(),
              cpu.avx512_bf16 ? "yes" : "no", cpu.amx_bf16 ? "yes" : "no");
  std::printf("%-6s %9s %7s %7s %6s %5s %5s %10s %10s %12s\n", "config", "precision", "encoder", "horizon", "hidden",
              "heads", "batch", "params", "step_ms", "samples/s");
  nlohmann::json ratios = nlohmann::json::object();
  for (const auto& c : configs) {
    double fp32_step = 0;
    for (const auto precision : precisions) {
      auto r = measure(c, steps, device, source, variable_hidden_size, precision, qat);
      std::printf("%-6s %9s %7lld %7lld %6lld %5lld %5lld %10lld %10.1f %12.1f\n", c.name,
                  qtft::precision_name(precision), static_cast<long long>(c.encoder), static_cast<long long>(c.horizon),
                  static_cast<long long>(c.hidden), static_cast<long long>(c.heads), static_cast<long long>(c.batch),
                  r["parameters"].get<long long>(), 1000 * r["step_seconds"].get<double>(),
                  r["samples_per_second"].get<double>());
      if (precision == qtft::Precision::Fp32) fp32_step = r["step_seconds"].get<double>();
      if (precision == qtft::Precision::Bf16 && fp32_step > 0) {
        const double ratio = fp32_step / r["step_seconds"].get<double>();
        std::printf("%-6s fp32 step / bf16 step: %.2fx\n", c.name, ratio);
        ratios[c.name] = ratio;
      }
      results.push_back(r);
    }
  }
  nlohmann::json j{{"device", device.str()},
                   {"threads", at::get_num_threads()},
                   {"cpu", cpu.cpu_name},
                   {"avx512_bf16", cpu.avx512_bf16},
                   {"amx_bf16", cpu.amx_bf16},
                   {"fp32_over_bf16_step", ratios},
                   {"data", qtft::data::describe_source(source)},
                   {"results", results}};
  std::printf("%s\n", j.dump().c_str());
  if (!json_path.empty()) qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
  return 0;
}
