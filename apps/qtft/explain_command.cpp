#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_run.h"
#include "qtft/infer/explain.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {

void add_explain_command(CLI::App& app) {
  struct Flags {
    ModelRunFlags run;
    std::string json;
    size_t top = 0;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("explain", "Variable importance and attention profile of a saved model");
  add_model_run_flags(*cmd, flags->run);
  cmd->add_option("--json", flags->json, "Also write the explanation as JSON")->check(writable_file());
  cmd->add_option("--top", flags->top, "Show each selector's K heaviest inputs (0: all)")->capture_default_str();
  cmd->callback([flags] {
    auto run = open_model_run(flags->run);
    auto e = infer::explain_model(run.loaded.model, run.dataset, run.split, flags->run.batch_size, run.device);
    std::cout << infer::format_explanation(e, flags->top);
    if (!flags->json.empty()) io::write_file_atomically(flags->json, infer::to_json(e, flags->top).dump(2) + "\n");
  });
}

}  // namespace qtft::cli
