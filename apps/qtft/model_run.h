#pragma once

#include <memory>
#include <string>

#include "data_flags.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/data/features/dataset.h"
#include "run_flags.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace qtft::cli {

// The flags shared by commands that apply a saved model to bars: evaluate, predict, explain.
struct ModelRunFlags {
  DataFlags data;
  RuntimeFlags runtime;
  std::string load_model;
  std::string split = "test";
  size_t batch_size = 512;
  std::string int8_kernels = "integer";
};

// Returns --load-model's option; `model_required` false leaves it optional (report: a
// backtest's folder or a model).
CLI::Option* add_model_run_flags(CLI::App& cmd, ModelRunFlags& flags, bool model_required = true);
// --int8-kernels, for commands that load int8 files.
void add_int8_kernels_flag(CLI::App& cmd, std::string& kernels);

// A saved model and the bars windowed exactly as when it was trained.
struct ModelRun {
  c10::Device device;
  artifact::LoadedModel loaded;
  data::Dataset dataset;
  data::Split split;
};
ModelRun open_model_run(ModelRunFlags& flags);

}  // namespace qtft::cli
