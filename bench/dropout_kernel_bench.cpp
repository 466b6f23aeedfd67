// qtft's fused CPU dropout (one bit per element kept for the backward pass) against
// LibTorch's dropout and against a bare multiply by a ready mask, on one activation of the
// paper configuration ([64, 192, 160], float), forward and backward,
// outside any profiler (which inflates small operators). Median of --repeats runs each,
// alternated so that the machine's slow spells fall on both alike. Prints a table and JSON.
//   build/bench/dropout_kernel_bench [--threads 2] [--repeats 30]
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qtft/io/atomic_file.h"
#include "qtft/model/dropout.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double time_ms(const std::function<void()>& fn) {
  const auto start = Clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Forward, then backward with `grad` into every input that requires it; without `grad`,
// the forward alone without gradient (as in forecasting).
void forward_backward(const std::function<at::Tensor()>& forward, const at::Tensor& grad) {
  if (!grad.defined()) {
    at::NoGradGuard no_grad;
    forward();
    return;
  }
  const at::Tensor out = forward();
  out.backward(grad);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"qtft's fused CPU dropout against LibTorch's and a bare multiply"};
  int threads = 2, repeats = 30;
  std::string json_path;
  app.add_option("--threads", threads, "CPU threads (0: LibTorch default)")->capture_default_str();
  app.add_option("--repeats", repeats, "Timed runs per kernel (the median is reported)")->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);
  if (threads > 0) at::set_num_threads(threads);
  repeats = std::max(repeats, 1);

  const std::vector<int64_t> shape{64, 192, 160};
  const at::Tensor x = at::randn(shape).requires_grad_(true);
  const at::Tensor grad = at::randn(shape);
  // A float mask drawn beforehand: multiplying by it is the floor of any dropout kernel
  // that must draw its mask, and the product qtft's dropout computes in its own pass.
  const at::Tensor mask = (at::rand(shape) < 0.9).to(at::kFloat) / 0.9;

  struct Case {
    const char* name;
    std::function<at::Tensor()> unfused, fused;
    bool backward = true;
  };
  const std::vector<Case> cases{
      {"dropout", [&] { return at::dropout(x, 0.1, true); }, [&] { return qtft::model::apply_dropout(x, 0.1, true); }},
      {"dropout", [&] { return at::dropout(x, 0.1, true); }, [&] { return qtft::model::apply_dropout(x, 0.1, true); },
       false},
      {"mul by a ready mask", [&] { return x * mask; }, [&] { return qtft::model::apply_dropout(x, 0.1, true); }},
  };

  std::printf("%d threads, activation [64, 192, 160] float, median of %d runs\n", at::get_num_threads(), repeats);
  std::printf("%-20s %-18s %10s %10s %8s\n", "against", "pass", "aten_ms", "qtft_ms", "ratio");
  nlohmann::json rows = nlohmann::json::array();
  for (const Case& c : cases) {
    const at::Tensor g = c.backward ? grad : at::Tensor();
    for (int i = 0; i < 3; ++i) forward_backward(c.unfused, g), forward_backward(c.fused, g);  // warm-up
    std::vector<double> unfused, fused;
    for (int i = 0; i < repeats; ++i) {
      unfused.push_back(time_ms([&] { forward_backward(c.unfused, g); }));
      fused.push_back(time_ms([&] { forward_backward(c.fused, g); }));
    }
    const double a = median(unfused), f = median(fused);
    const char* pass = c.backward ? "forward+backward" : "forward, no grad";
    std::printf("%-20s %-18s %10.2f %10.2f %8.2f\n", c.name, pass, a, f, f / a);
    rows.push_back({{"kernel", c.name}, {"pass", pass}, {"aten_ms", a}, {"qtft_ms", f}, {"qtft_vs_aten", f / a}});
  }
  const nlohmann::json j{{"threads", at::get_num_threads()}, {"shape", shape}, {"results", rows}};
  std::printf("%s\n", j.dump().c_str());
  if (!json_path.empty()) qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
  return 0;
}
