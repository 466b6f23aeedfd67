// `qtft report`: a backtest's folder as one HTML page (qtft::infer::write_backtest_report).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "qtft/infer/backtest_report.h"
#include "run_flags.h"

namespace qtft::cli {

void add_report_command(CLI::App& app) {
  struct Flags {
    std::string backtest, output;
    infer::ReportOptions report;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("report", "A backtest's folds, forecasts and model as one self-contained HTML page");
  cmd->add_option("--backtest", flags->backtest, "The --output folder of qtft backtest")->required();
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
    infer::write_backtest_report(flags->backtest, flags->report, flags->output);
    std::printf("Wrote %s\n", flags->output.c_str());
  });
}

}  // namespace qtft::cli
