#pragma once

namespace CLI {
class App;
}

namespace qtft::cli {

// Each adds one subcommand to the app; its callback runs the command and throws
// qtft::Error (exit 1) or qtft::UsageError (exit 2) on failure.
void add_make_data_command(CLI::App& app);
void add_prepare_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_diff_command(CLI::App& app);
void add_evaluate_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_forecast_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_export_int8_command(CLI::App& app);
void add_export_onnx_command(CLI::App& app);
void add_memory_report_command(CLI::App& app);
void add_watch_command(CLI::App& app);
void add_backtest_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_report_command(CLI::App& app);

}  // namespace qtft::cli
