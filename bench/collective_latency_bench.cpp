// The latency of the collectives data-parallel training makes, between local ranks:
// the all-reduce of an observer's [min, max] (two floats; QAT with live observers makes one
// per observer per forward), the stop poll and loss (one value), and a gradient bucket.
//   build/bench/collective_latency_bench [--ranks 2] [--calls 2000] [--json out.json]
// It starts its own ranks (dist::run_local_workers) and prints rank 0's figures.
#include <ATen/ops/zeros.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qtft/dist/collective.h"
#include "qtft/dist/environment.h"
#include "qtft/dist/local_workers.h"
#include "qtft/io/atomic_file.h"

namespace {

double microseconds_per_call(qtft::dist::Collective& group, int64_t elements, int calls) {
  std::vector<at::Tensor> t{at::zeros({elements})};
  for (int i = 0; i < calls / 10 + 1; ++i) group.all_reduce(t, qtft::dist::ReduceOp::max);
  group.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) group.all_reduce(t, qtft::dist::ReduceOp::max);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / calls;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Latency of Gloo all-reduces between local ranks"};
  int64_t ranks = 2;
  int calls = 2000;
  std::string json_path;
  app.add_option("--ranks", ranks, "Local ranks to start")->check(CLI::Range(2, 64));
  app.add_option("--calls", calls, "All-reduces per size")->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);

  const auto env = qtft::dist::distributed_environment();
  if (!env) {
    qtft::dist::LocalWorkersOptions options;
    options.program = std::filesystem::read_symlink("/proc/self/exe");
    options.arguments.assign(argv + 1, argv + argc);
    options.workers = ranks;
    options.threads_per_worker = 1;
    options.report = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    return qtft::dist::run_local_workers(options);
  }
  auto group = qtft::dist::Collective::connect(*env, std::chrono::seconds(60));
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t elements : {int64_t{1}, int64_t{2}, int64_t{1} << 10, int64_t{2} << 20}) {
    const int n = elements > 4096 ? std::max(1, calls / 100) : calls;
    const double us = microseconds_per_call(group, elements, n);
    rows.push_back({{"floats", elements}, {"calls", n}, {"microseconds", us}});
    if (env->rank == 0) std::printf("all-reduce of %8lld floats: %10.1f us\n", static_cast<long long>(elements), us);
  }
  if (env->rank == 0 && !json_path.empty()) {
    nlohmann::json j{{"ranks", env->world_size}, {"backend", "gloo"}, {"all_reduce", rows}};
    qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
  }
  return 0;
}
