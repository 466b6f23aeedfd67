#pragma once

// `qtft report`: a backtest's output folder as one self-contained HTML page (SVG charts
// written here, no script or file fetched when it is viewed): the fold table, IC and
// coverage across folds, fan charts against realized values, the variable-selection
// importances, the attention profile and the training curves.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace qtft::infer {

struct ReportOptions {
  // The series whose forecasts are drawn as fans (empty: the first two of the forecasts).
  std::vector<std::string> series;
  // The fans show the last this many forecast bars of each series, at this horizon step.
  int64_t fan_bars = 240;
  int32_t fan_step = 1;
  std::string title;  // empty: "Walk-forward backtest: <folder>"
};

// The page for the backtest in `folder`. Throws UsageError when the folder is not a finished
// backtest's output (no folds.json, another format, forecasts.parquet missing), or a series
// asked for has no forecasts (naming the ones there are).
std::string backtest_report_html(const std::filesystem::path& folder, const ReportOptions& options);

// Writes it to `output`, atomically.
void write_backtest_report(const std::filesystem::path& folder, const ReportOptions& options,
                           const std::filesystem::path& output);

}  // namespace qtft::infer
