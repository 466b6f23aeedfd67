// qtft: one binary, one subcommand per file. Exit codes: 0 success, 2 usage error,
// 1 any other failure, with a one-line message on stderr.
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <exception>
#include <iostream>

#include "commands.h"
#include "exit_code.h"
#include "local_launch.h"
#include "qtft/common/error.h"
#include "qtft/memory/memory_tracker.h"
#include "qtft/version.h"

int main(int argc, char** argv) {
  // Before any tensor exists: memory figures (epoch lines, memory-report) count what the
  // tracking allocator handed out, and oneDNN frees through whichever CPU allocator is
  // installed at the time, so it must not change under live buffers.
  qtft::memory::install_cpu_memory_tracking();
  qtft::cli::remember_command_line(argc, argv);
  // A file size limit (ulimit -f) then fails the write, which qtft reports and cleans up
  // after, instead of killing the process mid-file.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"qtft: Temporal Fusion Transformer forecasting with quantization-aware training", "qtft"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qtft " QTFT_VERSION_STRING);
  // A flag given twice takes its last value, as scripts that append overrides expect
  // (`--epochs 4 ... --epochs 1`); each command's options inherit this. Lists still gather
  // every value given.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  qtft::cli::add_make_data_command(app);
  qtft::cli::add_prepare_command(app);
  qtft::cli::add_convert_command(app);
  qtft::cli::add_inspect_command(app);
  qtft::cli::add_train_command(app);
  qtft::cli::add_evaluate_command(app);
  qtft::cli::add_predict_command(app);
  qtft::cli::add_forecast_command(app);
  qtft::cli::add_explain_command(app);
  qtft::cli::add_quantize_command(app);
  qtft::cli::add_export_int8_command(app);
  qtft::cli::add_export_onnx_command(app);
  qtft::cli::add_memory_report_command(app);
  qtft::cli::add_diff_command(app);
  qtft::cli::add_watch_command(app);
  qtft::cli::add_backtest_command(app);
  qtft::cli::add_tune_command(app);
  qtft::cli::add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const qtft::cli::ExitCode& e) {
    return e.code;
  } catch (const CLI::ParseError& e) {
    std::cerr << "qtft: " << e.what() << "\n(run 'qtft --help' or 'qtft <command> --help')\n";
    return 2;
  } catch (const qtft::UsageError& e) {
    std::cerr << "qtft: " << e.what() << "\n";
    return 2;
  } catch (const c10::Error& e) {
    // LibTorch's own message, without the C++ stack trace it carries.
    std::cerr << "qtft: error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "qtft: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
