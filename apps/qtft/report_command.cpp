// `qtft report`: a backtest's folder, or a model on bars, as one HTML page
// (qtft::infer::write_backtest_report, qtft::infer::model_report_html).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "model_run.h"
#include "qtft/common/error.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/infer/backtest_report.h"
#include "qtft/infer/model_report.h"
#include "qtft/infer/tune_report.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {

void add_report_command(CLI::App& app) {
  struct Flags {
    std::string backtest, tune, output;
    ModelRunFlags run;
    double cost_bps = 0.0;
    infer::ReportOptions report;
  };
  auto flags = std::make_shared<Flags>();
  flags->run.split = "all";
  auto* cmd = app.add_subcommand("report",
                                 "A backtest's folds, forecasts and model, a search's trials, or a model on bars, as "
                                 "one self-contained HTML page");
  auto* backtest = cmd->add_option("--backtest", flags->backtest, "The --output folder of qtft backtest");
  auto* tune = cmd->add_option("--tune", flags->tune, "The --output folder of qtft tune: its trials and range test");
  auto* model = add_model_run_flags(*cmd, flags->run, /*model_required=*/false);
  backtest->excludes(model);
  tune->excludes(backtest);
  tune->excludes(model);
  cmd->add_option("--cost-bps", flags->cost_bps,
                  "With --load-model: trading cost of the desk metrics' position, in basis points per unit traded")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--output", flags->output, "The page to write (report.html)")->required()->check(writable_file());
  cmd->add_option("--series", flags->report.series, "The series drawn as fan charts (default: the first two)")
      ->delimiter(',');
  cmd->add_option("--fan-bars", flags->report.fan_bars, "How many of each series' last forecasts the fans show")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--fan-step", flags->report.fan_step, "The horizon step the fans show")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--title", flags->report.title, "The page's title");
  cmd->callback([flags] {
    auto& f = *flags;
    const int given = !f.backtest.empty() + !f.tune.empty() + !f.run.load_model.empty();
    if (given != 1) {
      throw UsageError(
          "report: give --backtest DIR (a backtest's output), --tune DIR (a search's) or --load-model F with the "
          "bars to score");
    }
    if (!f.tune.empty()) {
      io::write_file_atomically(f.output, infer::tune_report_html(f.tune, f.report.title));
    } else if (!f.backtest.empty()) {
      infer::write_backtest_report(f.backtest, f.report, f.output);
    } else {
      auto run = open_model_run(f.run);
      const auto report = infer::score_model_for_report(run.loaded, f.run.load_model, run.dataset, run.split,
                                                        data::describe_source(f.run.data.source), f.run.batch_size,
                                                        run.device, f.cost_bps);
      io::write_file_atomically(f.output, infer::model_report_html(report, f.report));
    }
    std::printf("Wrote %s\n", f.output.c_str());
  });
}

}  // namespace qtft::cli
