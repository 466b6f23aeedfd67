// `qtft forecast`: the next horizon of every series in a file of recent bars, past its last
// bar. The work is qtft::infer::Forecaster's; this file parses flags and prints.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "data_flags.h"
#include "model_run.h"
#include "qtft/common/error.h"
#include "qtft/infer/forecast_report.h"
#include "qtft/infer/forecaster.h"
#include "qtft/io/atomic_file.h"
#include "run_flags.h"

namespace qtft::cli {

void add_forecast_command(CLI::App& app) {
  struct Flags {
    DataFlags data;
    RuntimeFlags runtime;
    std::string load_model, output, save_inputs, int8_kernels = "integer", conformal;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  flags->runtime.device = "cpu";
  auto* cmd = app.add_subcommand("forecast", "Forecast the bars after the last one of each series in a file");
  cmd->add_option("--load-model", flags->load_model, "A model saved by qtft train or quantize")
      ->required()
      ->check(CLI::ExistingFile);
  add_bar_source_flags(*cmd, flags->data);
  cmd->add_option("--output", flags->output, "Write the forecasts to forecasts.csv or forecasts.parquet")
      ->check(writable_file());
  cmd->add_flag("--json", flags->json, "Print the forecasts as JSON instead of a table");
  cmd->add_option("--save-inputs", flags->save_inputs,
                  "Also write the tensors the model takes (observed.npy, known.npy, symbol.npy, and statics.npy when "
                  "it has statics: the ONNX graph's inputs) to this folder");
  cmd->add_option("--conformal", flags->conformal,
                  "Issue the quantiles with the model file's conformal offsets of this method: split (train "
                  "--conformal split) or adaptive (per symbol, as a backtest --conformal adaptive left them)")
      ->check(CLI::IsMember({"split", "adaptive"}));
  add_runtime_flags(*cmd, flags->runtime);
  add_precision_flag(*cmd, flags->runtime);
  add_int8_kernels_flag(*cmd, flags->int8_kernels);
  cmd->callback([flags] {
    auto& f = *flags;
    if (!f.output.empty() && !f.output.ends_with(".csv") && !f.output.ends_with(".parquet")) {
      throw UsageError("--output " + f.output + ": use a .csv or .parquet file name");
    }
    if (f.data.source.uses_embedded_data())
      throw UsageError("forecast needs --parquet-file or --csv-file (the recent bars)");
    finish_data_flags(f.data);
    // The folder first: a path that cannot be one fails before any work.
    if (!f.save_inputs.empty()) std::filesystem::create_directories(f.save_inputs);
    f.runtime.apply();
    f.runtime.resolve_device();  // a GPU's limit, and --device cuda refused without one, before loading
    auto forecaster =
        infer::Forecaster::load(f.load_model, {parse_device_choice(f.runtime.device, "--device"),
                                               artifact::parse_int8_kernels(f.int8_kernels, "--int8-kernels"),
                                               f.runtime.precision_or(), f.conformal});
    if (!forecaster.int8_kernels().empty())
      std::fprintf(stderr, "%s: %s\n", f.load_model.c_str(), forecaster.int8_kernels().c_str());
    // Only each series' last bars are kept, file by file: a folder of years of bars costs
    // the largest file, not the whole history.
    f.data.source.read.inputs = forecaster.inputs();
    f.data.source.read.future_rows = true;  // rows ahead carry the known inputs of the bars to forecast
    auto bars = data::load_latest_bars(f.data.source, static_cast<size_t>(forecaster.min_bars()));
    auto forecasts = forecaster.forecast(bars.series);
    for (const auto& forecast : forecasts) std::cerr << infer::format_unknown_levels(forecast);
    if (!f.save_inputs.empty()) {
      std::string names;
      for (const auto& path : forecaster.save_inputs(bars.series, f.save_inputs))
        names += (names.empty() ? "" : ", ") + path.filename().string();
      std::fprintf(stderr, "Wrote the model's inputs to %s: %s\n", f.save_inputs.c_str(), names.c_str());
    }
    if (!f.output.empty()) {
      data::write_forecast_table(infer::forecast_table(forecasts), f.output);
      std::fprintf(stderr, "Wrote %s: %zu series x %lld steps\n", f.output.c_str(), forecasts.size(),
                   static_cast<long long>(forecaster.horizon()));
    }
    if (f.json) {
      std::cout << infer::to_json(forecasts).dump(2) << "\n";
    } else if (f.output.empty()) {
      std::cout << infer::format_forecasts(forecasts);
    }
  });
}

}  // namespace qtft::cli
