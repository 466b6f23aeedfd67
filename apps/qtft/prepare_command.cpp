// qtft prepare: builds (or finds) the feature store that train, evaluate and predict map.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <optional>

#include "commands.h"
#include "data_flags.h"
#include "qtft/artifact/model_file.h"
#include "qtft/common/error.h"
#include "qtft/data/features/dataset_summary.h"
#include "qtft/data/store/feature_store.h"

namespace qtft::cli {

void add_prepare_command(CLI::App& app) {
  struct Flags {
    DataFlags data;
    std::string load_model;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("prepare",
                                 "Build the feature store of a dataset (done by train when missing): features, targets "
                                 "and splits as memory-mapped arrays, in one streaming pass");
  add_bar_source_flags(*cmd, flags->data);
  add_input_flags(*cmd, flags->data);
  add_window_flags(*cmd, flags->data);
  cmd->add_option("--load-model", flags->load_model,
                  "Prepare for this model (its features, windows and splits), as evaluate and predict will use it")
      ->check(CLI::ExistingFile);
  cmd->callback([flags] {
    auto& f = *flags;
    if (f.data.source.uses_embedded_data())
      throw UsageError("prepare needs --data FOLDER (or --parquet-file/--csv-file)");
    finish_data_flags(f.data);
    std::optional<artifact::ModelFile> model;
    if (!f.load_model.empty()) model = artifact::load_model_file(f.load_model);
    const auto& options = model ? model->dataset : f.data.dataset;
    const auto store = data::prepare_feature_store(f.data.source, options, model ? &model->features : nullptr);
    print_store(store);
    std::cout << "Data: " << data::describe_source(f.data.source) << "\n"
              << data::summarize_dataset(data::map_feature_store(store.path, options));
  });
}

}  // namespace qtft::cli
