// Issue 35's configuration W (200 observed and 20 known real inputs and the symbol, encoder
// 168, horizon 24, hidden 160, batch 32) against its matrix products: one training step
// (forward, quantile loss, backward, Adam) per input width, QAT and checkpoint policy, with
// the activation peak, beside the time its matrix products take at the GEMM rate measured
// in the same run, and the 9-input step of the same sizes. The products' FLOPs are counted
// from the model's shapes (matrix_flops below). Prints a table and writes JSON.
//   build/bench/wide_step_bench [--widths 160,16] [--threads 2] [--timed-steps 1]
//                               [--policies none,blocks] [--qat both|off|live] [--precisions fp32,bf16]
//                               [--observed 200] [--known 20] [--json out.json]
// With several precisions each case runs in each, side by side; a bf16 row's GEMM time is at
// the rate of bf16 products (at::mm on bf16 matrices) in the same run.
#include <ATen/Parallel.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/randn.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_configs.h"
#include "qtft/common/cpu_features.h"
#include "qtft/common/error.h"
#include "qtft/common/precision.h"
#include "qtft/io/atomic_file.h"
#include "qtft/memory/autocast.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/memory/memory_tracker.h"
#include "qtft/model/model_building.h"
#include "qtft/train/step_memory.h"

namespace {

using qtft::memory::CheckpointPolicy;

// Forward FLOPs (2 per multiply-add) of every matrix product of the TFT at these options and
// batch: linear layers, LSTM gates, attention scores and values. A training step is counted
// as three forwards (the backward takes a product for the input's gradient and one for the
// weight's); elementwise work, layer norms and softmax are not counted.
double matrix_flops(const qtft::model::TftOptions& o, int64_t batch) {
  const double b = static_cast<double>(batch), l = static_cast<double>(o.encoder_length()),
               h = static_cast<double>(o.horizon()), t = l + h, d = static_cast<double>(o.hidden_size()),
               v = static_cast<double>(o.variable_width());
  const double observed = static_cast<double>(o.num_observed()), known = static_cast<double>(o.num_known());
  auto product = [](double rows, double in, double out) { return 2.0 * rows * in * out; };
  auto grn = [&](double rows, double width) { return 4.0 * product(rows, width, width); };
  auto selection = [&](double n, double rows) {
    double f = product(rows, n * v, d) + product(b, d, d) + product(rows, d, d) + 2.0 * product(rows, d, n) +
               product(rows, n * v, n);    // the selector's GRN and its skip layer
    f += n * grn(rows, v);                 // each variable's GRN
    if (v != d) f += product(rows, v, d);  // the projection to the hidden size
    return f;
  };
  double f = product(b * l, 1, v) * observed + product(b * t, 1, v) * known;  // input embeddings
  f += grn(b, d) + 4.0 * grn(b, d);                                           // statics and their contexts
  f += selection(observed + known, b * l) + selection(known, b * h);
  f += 2.0 * product(b * t, d, 4.0 * d) * static_cast<double>(o.lstm_layers());  // LSTM input and recurrence
  f += 2.0 * product(b * t, d, d);                                               // gate after the LSTM
  f += grn(b * t, d) + product(b, d, d);                                         // static enrichment
  const double heads = static_cast<double>(o.attention_heads()), head = d / heads;
  f += product(b * h, d, d) + product(b * t, d, d) + product(b * t, d, head);  // q, k, v projections
  f += 2.0 * b * heads * product(h, head, t);                                  // scores and weighted values
  f += product(b * h, head, d) + 2.0 * product(b * h, d, d);                   // output projection, gate
  f += grn(b * h, d) + 2.0 * product(b * h, d, d) +
       product(b * h, d, static_cast<double>(o.quantiles().size()));  // position-wise GRN, gate, output
  return 3.0 * f;
}

// FLOP/s of at::mm at the shapes that dominate the wide step: a variable GRN's product over
// every row and the selector's product over the concatenated inputs. Median of 5 runs each.
double gemm_rate(const qtft::model::TftOptions& o, int64_t batch, at::ScalarType dtype) {
  const int64_t rows = batch * o.encoder_length(), d = o.hidden_size(), v = o.variable_width();
  const int64_t n = o.num_observed() + o.num_known();
  double flops = 0.0, seconds = 0.0;
  for (const auto& [m, k, out] : {std::tuple{rows, v, v}, std::tuple{rows, n * v, d}}) {
    const at::Tensor a = at::randn({m, k}).to(dtype), w = at::randn({k, out}).to(dtype);
    std::vector<double> times;
    for (int r = 0; r < 6; ++r) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < (k * out < 100'000 ? 20 : 1); ++i) at::mm(a, w);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                      (k * out < 100'000 ? 20 : 1));
    }
    std::sort(times.begin() + 1, times.end());  // the first run warms up
    flops += 2.0 * static_cast<double>(m * k * out);
    seconds += times[3];
  }
  return flops / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The wide TFT's training step against its matrix products"};
  std::vector<int64_t> widths{160, 16};
  std::vector<std::string> policies{"none", "blocks"};
  std::string qat = "both", json_path;
  int threads = 2, timed_steps = 1;
  bool steps_only = false;
  int64_t observed = qtft::bench::kWideObserved, known = qtft::bench::kWideKnown;
  std::vector<std::string> precision_names{"fp32"};
  app.add_option("--widths", widths, "--variable-hidden-size values measured")->delimiter(',')->capture_default_str();
  app.add_option("--policies", policies, "Checkpoint policies measured")->delimiter(',')->capture_default_str();
  app.add_option("--qat", qat, "off, live or both")
      ->check(CLI::IsMember({"off", "live", "both"}))
      ->capture_default_str();
  app.add_option("--threads", threads, "CPU threads")->capture_default_str();
  app.add_option("--timed-steps", timed_steps, "Timed steps per case after a warm-up and a measured step (median)")
      ->capture_default_str();
  app.add_option("--precisions", precision_names, "fp32, bf16 or both, each case in each")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  app.add_option("--observed", observed, "W's observed real inputs (fewer for a quick check)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--known", known, "W's known real inputs")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  app.add_flag("--steps-only", steps_only,
               "The W steps alone: no 9-input step, no GEMM rate (for a run under callgrind, see "
               "bench/recompute_instructions.sh)");
  CLI11_PARSE(app, argc, argv);
  std::vector<qtft::Precision> precisions;
  for (const auto& name : precision_names) precisions.push_back(qtft::parse_precision(name));
  try {
    for (const auto p : precisions) qtft::memory::require_precision_support(p, c10::Device(c10::kCPU));
  } catch (const qtft::UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  qtft::memory::install_cpu_memory_tracking();
  at::set_num_threads(threads);
  const auto& c = qtft::bench::kWideConfig;
  const qtft::data::Dataset today = qtft::bench::dataset_for(qtft::bench::kSmallConfig);
  std::printf("CPU, %d threads; W: encoder %lld, horizon %lld, hidden %lld, heads %lld, batch %lld\n",
              at::get_num_threads(), static_cast<long long>(c.encoder), static_cast<long long>(c.horizon),
              static_cast<long long>(c.hidden), static_cast<long long>(c.heads), static_cast<long long>(c.batch));
  const auto& cpu = qtft::this_cpu_bf16_features();
  std::printf("CPU %s: avx512_bf16 %s, amx_bf16 %s\n", cpu.cpu_name.c_str(), cpu.avx512_bf16 ? "yes" : "no",
              cpu.amx_bf16 ? "yes" : "no");
  std::printf("%-9s %6s %4s %7s %5s %10s %12s %9s %11s %11s %8s\n", "inputs", "width", "QAT", "policy", "prec",
              "parameters", "act. peak", "step s", "GFLOP", "GEMM s", "ratio");
  qtft::train::TrainOptions train;
  train.batch_size = static_cast<size_t>(c.batch);
  nlohmann::json rows = nlohmann::json::array();
  auto measure = [&](int64_t observed, int64_t known, int64_t width, bool live, const std::string& policy,
                     qtft::Precision precision) {
    train.precision = precision;
    auto options = qtft::bench::wide_options(c, observed, known);
    options.variable_hidden_size(width).use_qat(live);
    const auto batch = qtft::bench::wide_batch(c, observed, known);
    const auto step = qtft::train::measure_training_step(
        options, 1, batch, train, qtft::memory::parse_checkpoint_policy(policy), c10::Device(c10::kCPU), timed_steps);
    const auto dtype = precision == qtft::Precision::Bf16 ? at::kBFloat16 : at::kFloat;
    const double flops = matrix_flops(options, c.batch), rate = steps_only ? 0.0 : gemm_rate(options, c.batch, dtype);
    const int64_t parameters = qtft::model::count_parameters(*qtft::model::TemporalFusionTransformer(options));
    std::printf("%4lld+%-4lld %6lld %4s %7s %5s %9.2fM %8.0f MiB %9.2f %11.1f %11.2f %8.2f\n",
                static_cast<long long>(observed), static_cast<long long>(known), static_cast<long long>(width),
                live ? "live" : "no", policy.c_str(), qtft::precision_name(precision),
                static_cast<double>(parameters) / 1e6, static_cast<double>(step.activation_peak_bytes) / (1 << 20),
                step.step_seconds, flops / 1e9, flops / rate, step.step_seconds / (flops / rate));
    std::fflush(stdout);
    rows.push_back({{"observed", observed},
                    {"known", known},
                    {"variable_hidden_size", width},
                    {"use_qat", live},
                    {"policy", policy},
                    {"precision", qtft::precision_name(precision)},
                    {"parameters", parameters},
                    {"step", qtft::train::to_json(step)},
                    {"matrix_gflop", flops / 1e9}});
    if (rate > 0) rows.back().update({{"gemm_gflops", rate / 1e9}, {"gemm_seconds", flops / rate}});
  };
  // Today's inputs at the same sizes, for the "at most 3x the 9-input step" target.
  if (!steps_only) {
    for (const auto precision : precisions)
      measure(static_cast<int64_t>(today.num_observed()), static_cast<int64_t>(today.num_known()), c.hidden, false,
              "none", precision);
  }
  for (const int64_t width : widths) {
    for (const bool live : {false, true}) {
      if ((qat == "off" && live) || (qat == "live" && !live)) continue;
      for (const auto& policy : policies)
        for (const auto precision : precisions) measure(observed, known, width, live, policy, precision);
    }
  }
  const nlohmann::json j{{"config", c.name},    {"threads", at::get_num_threads()}, {"timed_steps", timed_steps},
                         {"cpu", cpu.cpu_name}, {"avx512_bf16", cpu.avx512_bf16},   {"amx_bf16", cpu.amx_bf16},
                         {"results", rows}};
  if (!json_path.empty()) qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
  return 0;
}
