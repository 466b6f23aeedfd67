#include "model_run.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "qtft/common/error.h"

namespace qtft::cli {

void add_model_run_flags(CLI::App& cmd, ModelRunFlags& f) {
  cmd.add_option("--load-model", f.load_model, "A model saved by qtft train")->required()->check(CLI::ExistingFile);
  add_bar_source_flags(cmd, f.data);
  cmd.add_option("--split", f.split, "Which windows: train, validation or test")
      ->check(CLI::IsMember({"train", "validation", "test"}))
      ->capture_default_str();
  cmd.add_option("--batch-size", f.batch_size, "Windows per forward pass")->capture_default_str();
  add_runtime_flags(cmd, f.runtime);
}

ModelRun open_model_run(ModelRunFlags& f) {
  finish_data_flags(f.data);
  f.runtime.apply();
  if (f.batch_size == 0) throw UsageError("--batch-size must be at least 1");
  auto device = infer::resolve_device(f.runtime.device);
  auto loaded = infer::load_model(f.load_model, device);
  if (f.data.source.uses_embedded_data()) {
    std::cerr << "No --parquet-file or --csv-file given: using the " << data::describe_source(f.data.source) << "\n";
  }
  auto bars = data::load_bars(f.data.source);
  auto dataset = data::Dataset::build(bars, loaded.file.dataset, loaded.file.features);
  auto split = f.split == "train" ? data::Split::Train : f.split == "validation" ? data::Split::Validation : data::Split::Test;
  return {device, std::move(loaded), std::move(bars), std::move(dataset), split};
}

}  // namespace qtft::cli
