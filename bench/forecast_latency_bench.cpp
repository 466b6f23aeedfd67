// Serving latency of qtft::infer::Forecaster: one series per call (batch 1; median and
// 99th percentile) and 64 series per call (throughput), for the TFT paper's configuration
// and a small one, each as an FP32 model, a QAT model and int8 exports with float and with
// integer products, measured in the same run, in rounds (one call of each model per round),
// with the ratio to FP32. The models have random weights (latency does not
// depend on them) and are saved and loaded like trained ones. Prints a table and JSON;
// with --profile N, also where N single-series calls of each model spend their time
// (LibTorch's profiler, after the timed rounds, so it does not slow them).
//   build/bench/forecast_latency_bench [--calls 200] [--threads 1] [--json out.json]
//                                      [--config paper] [--model int8-integer-a7]
//                                      [--profile 50] [--top 25] [--export-onnx DIR]
#include <ATen/Parallel.h>

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_configs.h"
#include "op_profile.h"
#include "qtft/artifact/int8_file.h"
#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/infer/forecaster.h"
#include "qtft/io/atomic_file.h"
#include "qtft/model/model_building.h"
#include "qtft/onnx/onnx_export.h"
#include "qtft/train/calibration.h"

namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// The last `n` bars of a series.
qtft::data::BarSeries tail(const qtft::data::BarSeries& s, size_t n) {
  return qtft::data::slice_bars(s, s.size() - n, s.size());
}

// The model a row measures: FP32; QAT, whose weights are fake-quantized on every call; and
// the int8 export of a QAT model, with float products of its dequantized weights
// ("dequantized", bitwise the QAT model's forecasts) or with integer products wherever
// they are exact ("integer"). At 8-bit activations the kernel could saturate on most 8-bit
// weights, which then stay in float; at 7 bits every eligible product runs in integers.
struct Variant {
  const char* name;
  bool qat;
  int64_t activation_bits;
  bool int8_file;
  const char* int8_kernels;
  bool conformal = false;  // the FP32 file with adaptive conformal offsets, forecast with them
};
constexpr Variant kVariants[] = {
    {"fp32", false, 8, false, "integer"},
    {"qat", true, 8, false, "integer"},
    {"int8-dequantized", true, 8, true, "dequantized"},
    {"int8-integer", true, 8, true, "integer"},
    {"int8-integer-a7", true, 7, true, "integer"},
    {"fp32-conformal", false, 8, false, "integer", true},
};

// Saves the model of `variant` for configuration `c` and returns its path. QAT observers are
// calibrated on two batches, as an export requires.
std::filesystem::path save_model(const qtft::bench::TftConfig& c, const Variant& variant,
                                 const qtft::data::Dataset& dataset, const std::filesystem::path& dir) {
  auto options = qtft::model::model_options_for(dataset);
  options.hidden_size(c.hidden).attention_heads(c.heads).use_qat(variant.qat);
  if (variant.qat) options.activation_bits(variant.activation_bits);
  auto model = qtft::model::build_model(options, 1);
  if (variant.qat) qtft::train::calibrate_observers(model, dataset, 2, 64, 1, c10::Device(c10::kCPU));
  const auto path = dir / (std::string(c.name) + "-" + variant.name + ".safetensors");
  qtft::artifact::save_model_file(
      path, {options, dataset.schema(), dataset.options(), qtft::artifact::named_weights(*model), std::nullopt});
  if (variant.conformal) {
    // Offsets of every symbol (their values do not change the work).
    qtft::artifact::ConformalCalibration offsets{"adaptive", 0.2, 0, {}, {}};
    const auto width = static_cast<size_t>(options.horizon()) * options.quantiles().size();
    for (const auto& symbol : dataset.schema().symbols) offsets.offsets[symbol] = std::vector<double>(width, 0.1);
    qtft::artifact::save_conformal(path, offsets);
  }
  if (!variant.int8_file) return path;
  const auto int8_path = dir / (std::string(c.name) + "-" + variant.name + ".int8.safetensors");
  qtft::artifact::export_int8_file(qtft::artifact::load_model_file(path), path.string(), int8_path);
  return int8_path;
}

// One model of a configuration, loaded and fed, and its timings.
struct Loaded {
  const Variant* variant;
  std::filesystem::path path;
  qtft::infer::Forecaster forecaster;
  std::vector<double> single_ms;
  double batch_ms_total = 0.0;
};

// Times every model of configuration `c` in rounds, one call of each model per round, so
// that the machine's slower and faster spells fall on all of them alike: their ratios to
// FP32 are what the targets are about, and on a shared machine the spells last seconds.
std::vector<nlohmann::json> measure(const qtft::bench::TftConfig& c, const std::vector<const Variant*>& variants,
                                    int calls, int profiled_calls, int top, const std::filesystem::path& dir,
                                    const std::filesystem::path& onnx_dir) {
  const auto bars = qtft::data::generate_synthetic_bars(qtft::data::SyntheticOptions{});
  const auto dataset = qtft::bench::dataset_for(c);
  std::vector<Loaded> models;
  for (const Variant* variant : variants) {
    const auto path = save_model(c, *variant, dataset, dir);
    models.push_back(
        {variant,
         path,
         qtft::infer::Forecaster::load(
             path, {qtft::DeviceChoice::Cpu, qtft::artifact::parse_int8_kernels(variant->int8_kernels, "int8_kernels"),
                    qtft::Precision::Fp32, variant->conformal ? "adaptive" : ""}),
         {},
         0.0});
  }
  const auto need = static_cast<size_t>(models.front().forecaster.min_bars());
  const auto one = tail(bars.series[0], need + 100);
  constexpr size_t kSeries = 64;
  std::vector<qtft::data::BarSeries> many;
  for (size_t i = 0; i < kSeries; ++i) {
    many.push_back(tail(bars.series[i % bars.series.size()], need + i));  // different lengths, like real feeds
  }

  for (Loaded& m : models) {
    for (int i = 0; i < 5; ++i) m.forecaster.forecast(one);  // warm-up: first-call allocations
    m.forecaster.forecast(many);
  }
  for (int i = 0; i < calls; ++i) {
    for (Loaded& m : models) {
      const auto start = Clock::now();
      m.forecaster.forecast(one);
      m.single_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
  }
  const int batch_calls = std::max(3, calls / 20);
  for (int i = 0; i < batch_calls; ++i) {
    for (Loaded& m : models) {
      const auto start = Clock::now();
      m.forecaster.forecast(many);
      m.batch_ms_total += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    }
  }

  if (!onnx_dir.empty()) {
    // The same models as ONNX graphs and the same series as the graphs' inputs, for
    // onnx_latency_bench.py to time onnxruntime on: the FP32 file as a float graph, the first
    // int8 file as QDQ (the int8 variants differ in their kernels only, not in the graph).
    // Named <config>-fp32.onnx and <config>-int8.onnx.
    bool int8_exported = false;
    for (const Loaded& m : models) {
      if (m.variant->name == std::string("fp32")) {
        qtft::onnx_export::export_onnx(m.path, onnx_dir / (std::string(c.name) + "-fp32.onnx"));
      } else if (m.variant->int8_file && !int8_exported) {
        qtft::onnx_export::export_onnx(m.path, onnx_dir / (std::string(c.name) + "-int8.onnx"));
        int8_exported = true;
      }
    }
    for (const auto& [folder, series] :
         {std::pair{"batch1", std::vector<qtft::data::BarSeries>{one}}, std::pair{"batch64", many}}) {
      const auto inputs = onnx_dir / (std::string(c.name) + "-" + folder);
      std::filesystem::create_directories(inputs);
      models.front().forecaster.save_inputs(series, inputs);
    }
  }

  std::vector<nlohmann::json> profiles;
  for (Loaded& m : models) {
    if (profiled_calls < 1) break;
    qtft::bench::start_op_profile();
    for (int i = 0; i < profiled_calls; ++i) m.forecaster.forecast(one);
    const auto times = qtft::bench::stop_op_profile(profiled_calls);
    const auto top_level = qtft::bench::by_time(times.top_level), self = qtft::bench::by_time(times.self);
    const double profiled_ms = qtft::bench::total(times.top_level).ms;
    const int64_t all_calls = qtft::bench::total(times.self).calls;
    std::printf("\n%s %s, one series: %.3f ms per call (profiled), %lld operator calls per call\n", c.name,
                m.variant->name, profiled_ms, static_cast<long long>(all_calls));
    profiles.push_back({{"profiled_ms_per_call", profiled_ms},
                        {"operator_calls_per_call", all_calls},
                        {"top_level", qtft::bench::print_op_table("operator, called by the forecast (inclusive)",
                                                                  top_level, profiled_ms, top, "call")},
                        {"self", qtft::bench::print_op_table("operator, self time (callees excluded)", self,
                                                             profiled_ms, top, "call")}});
  }
  if (!profiles.empty()) std::printf("\n");

  std::vector<nlohmann::json> rows;
  for (size_t k = 0; k < models.size(); ++k) {
    const Loaded& m = models[k];
    const double batch_ms = m.batch_ms_total / batch_calls;
    rows.push_back({{"config", c.name},
                    {"model", m.variant->name},
                    {"activation_bits", m.variant->activation_bits},
                    {"int8_kernels", m.forecaster.int8_kernels()},
                    {"encoder_length", c.encoder},
                    {"horizon", c.horizon},
                    {"hidden_size", c.hidden},
                    {"attention_heads", c.heads},
                    {"file_bytes", std::filesystem::file_size(m.path)},
                    {"calls", calls},
                    {"single_median_ms", percentile(m.single_ms, 0.5)},
                    {"single_p99_ms", percentile(m.single_ms, 0.99)},
                    {"batch_series", kSeries},
                    {"batch_ms", batch_ms},
                    {"batch_series_per_second", 1000.0 * static_cast<double>(kSeries) / batch_ms}});
    if (k < profiles.size()) rows.back()["single_profile"] = profiles[k];
  }
  return rows;
}

std::string forecaster_kernels_note(const nlohmann::json& row) { return row["int8_kernels"].get<std::string>(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Forecaster latency and throughput: FP32, QAT and int8 files"};
  int calls = 200, threads = 1;
  std::string json_path;
  app.add_option("--calls", calls, "Timed single-series calls per configuration")->capture_default_str();
  app.add_option("--threads", threads, "CPU threads for LibTorch (0: its default)")->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  int profiled_calls = 0, top = 25;
  app.add_option("--profile", profiled_calls, "Also profile this many single-series calls of each model")
      ->capture_default_str();
  app.add_option("--top", top, "Operators listed per profile")->capture_default_str();
  std::vector<std::string> only_configs, only_models;
  app.add_option("--config", only_configs, "Only these configurations (small, paper); default all");
  app.add_option("--model", only_models,
                 "Only these models (fp32, qat, int8-dequantized, ..., fp32-conformal); default all");
  std::string onnx_dir;
  app.add_option("--export-onnx", onnx_dir,
                 "Also write the FP32 and int8 models as ONNX graphs, and the timed series as their inputs, to this "
                 "folder (bench/onnx_latency_bench.py times onnxruntime on them)");
  CLI11_PARSE(app, argc, argv);
  if (calls < 1) {
    std::fprintf(stderr, "--calls must be at least 1\n");
    return 2;
  }
  if (threads > 0) at::set_num_threads(threads);
  if (!onnx_dir.empty()) std::filesystem::create_directories(onnx_dir);
  const auto dir = std::filesystem::temp_directory_path() / ("qtft-forecast-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);

  std::printf("Forecaster on the CPU, %d threads, %d single-series calls per configuration and model\n",
              at::get_num_threads(), calls);
  std::printf("%-6s %-17s %7s %7s %6s %10s %10s %8s %8s %11s %8s %13s\n", "config", "model", "encoder", "horizon",
              "hidden", "file_KiB", "median_ms", "p99_ms", "x fp32", "batch64_ms", "x fp32", "series/s (64)");
  nlohmann::json results = nlohmann::json::array();
  auto wanted = [](const std::vector<std::string>& only, const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  for (const auto& c : {qtft::bench::kSmallConfig, qtft::bench::kPaperConfig}) {
    if (!wanted(only_configs, c.name)) continue;
    // FP32 is always measured, first: the ratios need it.
    std::vector<const Variant*> variants;
    for (const Variant& v : kVariants) {
      if (std::string(v.name) == "fp32" || wanted(only_models, v.name)) variants.push_back(&v);
    }
    auto rows = measure(c, variants, calls, profiled_calls, top, dir, onnx_dir);
    const double fp32_single = rows.front()["single_median_ms"].get<double>();
    const double fp32_batch = rows.front()["batch_ms"].get<double>();
    for (auto& r : rows) {
      const double single = r["single_median_ms"].get<double>(), batch = r["batch_ms"].get<double>();
      r["single_median_vs_fp32"] = single / fp32_single;
      r["batch_vs_fp32"] = batch / fp32_batch;
      std::printf("%-6s %-17s %7lld %7lld %6lld %10.0f %10.2f %8.2f %8.2f %11.1f %8.2f %13.0f\n", c.name,
                  r["model"].get<std::string>().c_str(), static_cast<long long>(c.encoder),
                  static_cast<long long>(c.horizon), static_cast<long long>(c.hidden),
                  r["file_bytes"].get<double>() / 1024.0, single, r["single_p99_ms"].get<double>(),
                  single / fp32_single, batch, batch / fp32_batch, r["batch_series_per_second"].get<double>());
      if (!forecaster_kernels_note(r).empty()) std::printf("         %s\n", forecaster_kernels_note(r).c_str());
      results.push_back(r);
    }
  }
  std::filesystem::remove_all(dir);
  nlohmann::json j{{"device", "cpu"}, {"threads", at::get_num_threads()}, {"results", results}};
  std::printf("%s\n", j.dump().c_str());
  if (!json_path.empty()) qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
  return 0;
}
