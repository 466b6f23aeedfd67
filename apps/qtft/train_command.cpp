#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "data_flags.h"
#include "qtft/data/batch.h"
#include "qtft/data/batch_order.h"
#include "qtft/data/dataset_summary.h"

namespace qtft::cli {
namespace {

struct TrainFlags {
  DataFlags data;
  size_t batch_size = 64;
  uint64_t seed = 42;
};

// Walks one epoch of shuffled training batches: proves the whole data path end to end
// and says how fast it is, so the model's own cost is later easy to tell apart.
void run_data_epoch(const data::Dataset& dataset, const TrainFlags& f) {
  data::BatchOrder order(dataset.num_windows(data::Split::Train), f.batch_size, f.seed, true);
  auto indices = order.epoch_order(0);
  auto start = std::chrono::steady_clock::now();
  double checksum = 0.0;
  for (size_t b = 0; b < order.num_batches(); ++b) {
    size_t first = b * f.batch_size;
    size_t count = std::min(f.batch_size, indices.size() - first);
    auto batch = data::make_batch(dataset, data::Split::Train, {indices.data() + first, count});
    checksum += batch.target.sum().item<double>();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("Batches: %zu per epoch (batch size %zu, seed %llu), one epoch assembled in %.2f s "
              "(%.0f windows/s; target checksum %.6g)\n",
              order.num_batches(), f.batch_size, static_cast<unsigned long long>(f.seed), seconds,
              static_cast<double>(indices.size()) / std::max(seconds, 1e-9), checksum);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto flags = std::make_shared<TrainFlags>();
  auto* cmd = app.add_subcommand("train", "Train a TFT forecaster on bars (the embedded data by default)");
  add_bar_source_flags(*cmd, flags->data);
  add_window_flags(*cmd, flags->data);
  cmd->add_option("--batch-size", flags->batch_size, "Windows per batch")->capture_default_str();
  cmd->add_option("--seed", flags->seed, "Seed for the batch order")->capture_default_str();
  cmd->callback([flags] {
    auto& f = *flags;
    finish_data_flags(f.data);
    f.data.dataset.validate();
    const auto& source = f.data.source;
    if (source.uses_embedded_data()) {
      std::cout << "No --parquet-file or --csv-file given: training on the "
                << data::describe_source(source) << "\n";
    }
    auto bars = data::load_bars(source);
    auto dataset = data::Dataset::build(bars, f.data.dataset);
    std::cout << "Data: " << data::describe_source(source) << "\n" << data::summarize_dataset(bars, dataset);
    run_data_epoch(dataset, f);
    std::cout << "Summary: data ready (" << dataset.num_windows(data::Split::Train) << " training windows). "
              << "Training itself comes with the TFT model (issue 3); this build prepares and checks the data only.\n";
  });
}

}  // namespace qtft::cli
