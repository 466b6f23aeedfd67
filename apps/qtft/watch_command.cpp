// `qtft watch`: one verdict line per series and overall, JSON for monitoring, and an exit
// code a cron job can alert on (docs/ONLINE.md). The checks are eval::watch_drift's.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "data_flags.h"
#include "exit_code.h"
#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/store/feature_store.h"
#include "qtft/eval/drift_watch.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {

void add_watch_command(CLI::App& app) {
  struct Flags {
    DataFlags data;
    RuntimeFlags runtime;
    std::string load_model, reference, json, conformal;
    eval::DriftOptions drift;
  };
  auto flags = std::make_shared<Flags>();
  flags->runtime.device = "cpu";
  auto* cmd = app.add_subcommand(
      "watch",
      "Check a deployed model on recent bars: against its recorded validation loss, the naive baselines and "
      "a reference model; exit 0 ok, 3 degraded, 4 no better than naive, 5 roll back");
  cmd->add_option("--load-model", flags->load_model, "The deployed model (saved by qtft train)")
      ->required()
      ->check(CLI::ExistingFile);
  add_bar_source_flags(*cmd, flags->data);
  cmd->add_option("--reference", flags->reference,
                  "A model to roll back to (the FP32 one, say): advised when the model is more than --rollback-pct "
                  "worse on the same bars")
      ->check(CLI::ExistingFile);
  cmd->add_option("--degraded-pct", flags->drift.degraded_pct,
                  "A loss this many percent above the recorded validation loss is degraded")
      ->capture_default_str();
  cmd->add_option("--rollback-pct", flags->drift.rollback_pct, "The rollback rule's margin against --reference")
      ->capture_default_str();
  cmd->add_option("--cost-bps", flags->drift.cost_bps,
                  "Trading cost of the desk metrics' position, in basis points per unit of position traded")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--json", flags->json, "Also write the report as JSON")->check(writable_file());
  cmd->add_option("--conformal", flags->conformal,
                  "adaptive: go on with the model's adaptive conformal offsets over the bars after those they "
                  "learned from, report their coverage beside the raw quantiles', and save them back in the model "
                  "file")
      ->check(CLI::IsMember({"adaptive"}));
  add_runtime_flags(*cmd, flags->runtime);
  cmd->callback([flags] {
    auto& f = *flags;
    if (f.data.source.uses_embedded_data())
      throw UsageError("watch needs --parquet-file or --csv-file (the recent bars)");
    if (!(f.drift.degraded_pct >= 0)) throw UsageError("--degraded-pct must not be negative");
    if (!(f.drift.rollback_pct >= 0)) throw UsageError("--rollback-pct must not be negative");
    finish_data_flags(f.data);
    f.runtime.apply();
    const auto device = f.runtime.resolve_device();
    auto model = artifact::load_model(f.load_model, device);
    if (!model.file.training) {
      throw Error(f.load_model + ": records no validation loss (no training state): watch compares against it");
    }
    std::optional<artifact::LoadedModel> reference;
    if (!f.reference.empty()) reference = artifact::load_model(f.reference, device);
    const auto bars = data::load_bars(data::with_model_inputs(f.data.source, model.file.features));
    f.drift.adaptive_conformal = f.conformal == "adaptive";
    if (f.drift.adaptive_conformal) artifact::require_conformal(model.file, f.conformal, f.load_model);
    const auto report = eval::watch_drift(model, bars, f.drift, reference ? &*reference : nullptr, f.reference);
    std::printf("%s on %s (the newer half of each series' bars):\n%s", f.load_model.c_str(),
                data::describe_source(f.data.source).c_str(), eval::format_drift_report(report).c_str());
    if (!f.json.empty()) io::write_file_atomically(f.json, eval::to_json(report).dump(2) + "\n");
    // The offsets move on with every bar scored: the next watch starts where this one ended.
    if (report.conformal && report.conformal->raw.outcomes > 0) {
      artifact::save_conformal(f.load_model, report.conformal->updated);
      std::printf("Saved the adaptive conformal offsets in %s\n", f.load_model.c_str());
    }
    throw ExitCode{report.exit_code()};
  });
}

}  // namespace qtft::cli
