#pragma once

// Where the time of a profiled region goes, from LibTorch's (Kineto) profiler: each
// operator's time where the region itself calls it (inclusive; these rows add up to the
// profiled time) and its self time (minus the operators it calls). Shared by the
// benchmarks that profile: profile_step_bench (training steps) and forecast_latency_bench
// (forecasts).
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace qtft::bench {

struct OpTime {
  double ms = 0.0;    // per repetition
  int64_t calls = 0;  // per repetition
};

struct OpTimes {
  std::map<std::string, OpTime> top_level;  // inclusive time of calls made by the region itself
  std::map<std::string, OpTime> self;       // time inside an operator minus the operators it calls
};

// Starts LibTorch's profiler on the CPU; stop_op_profile ends it and tallies what ran in
// between, divided by `repetitions` (of the region profiled).
inline void start_op_profile() {
  namespace profiler = torch::autograd::profiler;
  namespace impl = torch::profiler::impl;
  profiler::prepareProfiler(impl::ProfilerConfig(impl::ProfilerState::KINETO), {impl::ActivityType::CPU});
  profiler::enableProfiler(impl::ProfilerConfig(impl::ProfilerState::KINETO), {impl::ActivityType::CPU});
}

// Per thread, events sorted by start form a call tree: the top level partitions the
// region, self times partition it at the finest grain.
inline OpTimes stop_op_profile(int repetitions) {
  namespace profiler = torch::autograd::profiler;
  const auto result = profiler::disableProfiler();
  std::map<uint64_t, std::vector<const profiler::KinetoEvent*>> by_thread;
  for (const auto& e : result->events()) {
    if (e.deviceType() == c10::DeviceType::CPU && !e.isAsync()) by_thread[e.startThreadId()].push_back(&e);
  }
  OpTimes out;
  for (auto& [thread, list] : by_thread) {
    std::sort(list.begin(), list.end(), [](const auto* a, const auto* b) {
      return a->startNs() != b->startNs() ? a->startNs() < b->startNs() : a->endNs() > b->endNs();
    });
    std::vector<const profiler::KinetoEvent*> open;  // the calls enclosing the current one
    for (const auto* e : list) {
      while (!open.empty() && open.back()->endNs() <= e->startNs()) open.pop_back();
      const double ms = static_cast<double>(e->durationNs()) / 1e6 / repetitions;
      if (open.empty()) {
        auto& t = out.top_level[e->name()];
        t.ms += ms;
        t.calls += 1;
      } else {
        out.self[open.back()->name()].ms -= ms;
      }
      auto& self = out.self[e->name()];
      self.ms += ms;
      self.calls += 1;
      open.push_back(e);
    }
  }
  for (auto* table : {&out.top_level, &out.self}) {
    for (auto& [name, t] : *table) t.calls /= repetitions;
  }
  return out;
}

// The rows of a table summed: over top_level, the profiled time and the calls the region
// made itself; over self, every operator call.
inline OpTime total(const std::map<std::string, OpTime>& times) {
  OpTime sum;
  for (const auto& [name, t] : times) sum.ms += t.ms, sum.calls += t.calls;
  return sum;
}

inline std::vector<std::pair<std::string, OpTime>> by_time(const std::map<std::string, OpTime>& times) {
  std::vector<std::pair<std::string, OpTime>> rows(times.begin(), times.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  return rows;
}

// Prints the first `top` rows with their share of `total` and returns them as JSON;
// `unit` names the repetition ("step", "call").
inline nlohmann::json print_op_table(const char* title, const std::vector<std::pair<std::string, OpTime>>& rows,
                                     double total, int top, const std::string& unit) {
  std::printf("  %-58s %9s %7s %8s\n", title, ("ms/" + unit).c_str(), "share", "calls");
  nlohmann::json out = nlohmann::json::array();
  for (int i = 0; i < std::min<int>(top, static_cast<int>(rows.size())); ++i) {
    const auto& [name, t] = rows[static_cast<size_t>(i)];
    std::printf("  %-58.58s %9.3f %6.1f%% %8lld\n", name.c_str(), t.ms, 100.0 * t.ms / total,
                static_cast<long long>(t.calls));
    out.push_back({{"name", name}, {"ms_per_" + unit, t.ms}, {"share", t.ms / total}, {"calls", t.calls}});
  }
  return out;
}

}  // namespace qtft::bench
