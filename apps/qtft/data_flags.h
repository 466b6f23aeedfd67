#pragma once

#include "qtft/data/bars/bar_source.h"
#include "qtft/data/features/dataset.h"
#include "qtft/data/store/feature_store.h"

namespace CLI {
class App;
}

namespace qtft::cli {

// The flags every command that reads bars shares: where they come from, which columns
// hold what, and how windows are cut.
struct DataFlags {
  data::BarSource source;
  data::DatasetOptions dataset;
  std::string timestamp_unit = "auto";
  std::string missing = "error";
  std::string target_transform = "log-return", normalize = "pooled";
  std::string calendar;     // --calendar: the terms, parsed by finish_data_flags; empty: from the bars
  std::string inputs_file;  // --inputs: a declaration file, added to --observed and --known
};

void add_bar_source_flags(CLI::App& cmd, DataFlags& flags);
void add_window_flags(CLI::App& cmd, DataFlags& flags);
// --observed, --known, --static and their categorical kinds: the columns declared as inputs (for commands that fit a
// model's features; a saved model reads the columns it was trained on).
void add_input_flags(CLI::App& cmd, DataFlags& flags);
// One line on stderr: which feature store serves the data, and whether it was built.
void print_store(const data::StorePreparation& store);
// Applies flags that need post-processing (the timestamp unit) to flags.source.read.
void finish_data_flags(DataFlags& flags);

}  // namespace qtft::cli
