#include "model_run.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "qtft/common/error.h"

namespace qtft::cli {

CLI::Option* add_model_run_flags(CLI::App& cmd, ModelRunFlags& f, bool model_required) {
  auto* model = cmd.add_option("--load-model", f.load_model, "A model saved by qtft train")->check(CLI::ExistingFile);
  if (model_required) model->required();
  add_bar_source_flags(cmd, f.data);
  cmd.add_option("--split", f.split,
                 "Which windows: train, validation, test, or all (every window of the data, across the splits)")
      ->check(CLI::IsMember({"train", "validation", "test", "all"}))
      ->capture_default_str();
  cmd.add_option("--batch-size", f.batch_size, "Windows per forward pass")->capture_default_str();
  add_runtime_flags(cmd, f.runtime);
  add_precision_flag(cmd, f.runtime);
  add_int8_kernels_flag(cmd, f.int8_kernels);
  return model;
}

void add_int8_kernels_flag(CLI::App& cmd, std::string& kernels) {
  cmd.add_option("--int8-kernels", kernels,
                 "For int8 files: integer (integer products wherever they are exact) or dequantized (float products, "
                 "bitwise the QAT model's)")
      ->check(CLI::IsMember({"integer", "dequantized"}))
      ->capture_default_str();
}

ModelRun open_model_run(ModelRunFlags& f) {
  finish_data_flags(f.data);
  f.runtime.apply();
  if (f.batch_size == 0) throw UsageError("--batch-size must be at least 1");
  auto device = f.runtime.resolve_device();
  auto loaded =
      artifact::load_model(f.load_model, device, artifact::parse_int8_kernels(f.int8_kernels, "--int8-kernels"));
  artifact::use_precision(loaded, f.runtime.precision_or(), f.load_model);
  if (const std::string kernels = artifact::describe_int8_kernels(loaded); !kernels.empty()) {
    std::cerr << f.load_model << ": " << kernels << "\n";
  }
  if (f.data.source.uses_embedded_data()) {
    std::cerr << "No --parquet-file or --csv-file given: using the " << data::describe_source(f.data.source) << "\n";
  }
  auto dataset = data::open_dataset(f.data.source, loaded.file.dataset, &loaded.file.features,
                                    data::StoreAccess::BuildIfNeeded, print_store);
  auto split = f.split == "train"        ? data::Split::Train
               : f.split == "validation" ? data::Split::Validation
               : f.split == "all"        ? data::Split::All
                                         : data::Split::Test;
  const c10::Device model_device = loaded.device;  // an int8 file's integer products: the CPU
  return {model_device, std::move(loaded), std::move(dataset), split};
}

}  // namespace qtft::cli
