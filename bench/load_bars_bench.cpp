// Loading cost of a large bar file: wall time and peak resident memory of reading,
// validating and turning N bars into a dataset, and of what a forecast reads of the same
// file (each series' last 65 bars: encoder 64 plus one). Prints a table and JSON.
//   build/bench/load_bars_bench --rows 2000000 --symbols 4 [--json out.json]
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "qtft/common/format.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/synthetic.h"
#include "qtft/data/features/dataset.h"
#include "qtft/io/atomic_file.h"

namespace {

uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Measure loading a large Parquet file of bars"};
  int64_t rows = 2'000'000;
  int symbols = 4;
  std::string json_path;
  std::string file = (std::filesystem::temp_directory_path() / "qtft_load_bench.parquet").string();
  app.add_option("--rows", rows)->capture_default_str();
  app.add_option("--symbols", symbols)->capture_default_str();
  app.add_option("--file", file, "Parquet file to write and read")->capture_default_str();
  app.add_option("--json", json_path, "Write the figures as JSON");
  CLI11_PARSE(app, argc, argv);

  // Generation runs in a child process so that its memory does not count towards the
  // peak of the loading process measured here.
  std::string cmd = "'" + std::string(QTFT_CLI_PATH) + "' make-data --output '" + file + "' --rows " +
                    std::to_string(rows) + " --symbols " + std::to_string(symbols) + " > /dev/null";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "make-data failed\n");
    return 1;
  }
  uint64_t baseline = peak_rss_bytes();
  // First, as its peak would hide under the whole read's: the row groups holding each
  // series' last bars only.
  auto start = std::chrono::steady_clock::now();
  auto latest = qtft::data::read_latest_bars_parquet(file, {}, 65);
  double latest_s = seconds_since(start);
  uint64_t after_latest = peak_rss_bytes();
  start = std::chrono::steady_clock::now();
  auto bars = qtft::data::read_bars_parquet(file);
  double read_s = seconds_since(start);
  uint64_t after_read = peak_rss_bytes();
  start = std::chrono::steady_clock::now();
  auto dataset = qtft::data::Dataset::build(bars, {});
  double build_s = seconds_since(start);
  uint64_t after_build = peak_rss_bytes();
  auto file_bytes = std::filesystem::file_size(file);
  std::filesystem::remove(file);

  std::printf("config: %lld bars, %d symbols, Parquet %s, encoder 64, horizon 8\n", static_cast<long long>(rows),
              symbols, qtft::format_bytes(file_bytes).c_str());
  std::printf("a forecast's read (last 65 bars of %zu series): %.3f s, peak RSS %s\n", latest.series.size(), latest_s,
              qtft::format_bytes(after_latest).c_str());
  std::printf("read + validate: %.2f s, peak RSS %s\n", read_s, qtft::format_bytes(after_read).c_str());
  std::printf("features + windows: %.2f s, peak RSS %s (process baseline %s)\n", build_s,
              qtft::format_bytes(after_build).c_str(), qtft::format_bytes(baseline).c_str());
  std::printf("train windows: %zu\n", dataset.num_windows(qtft::data::Split::Train));
  nlohmann::json j{{"rows", rows},
                   {"symbols", symbols},
                   {"parquet_bytes", file_bytes},
                   {"latest_read_seconds", latest_s},
                   {"peak_rss_after_latest_read_bytes", after_latest},
                   {"read_seconds", read_s},
                   {"build_seconds", build_s},
                   {"baseline_peak_rss_bytes", baseline},
                   {"peak_rss_after_read_bytes", after_read},
                   {"peak_rss_bytes", after_build}};
  std::printf("%s\n", j.dump().c_str());
  if (!json_path.empty()) qtft::io::write_file_atomically(json_path, j.dump(2) + "\n");
  return 0;
}
