// forecast_latest: loads a qtft model and prints the forecast of the bars after the last
// one of every series in a Parquet or CSV file of recent bars, as `qtft forecast` does.
// It includes only qtft's serving headers, which need no LibTorch headers.
#include <qtft/common/error.h>
#include <qtft/data/bars/bars.h>
#include <qtft/infer/forecast_report.h>
#include <qtft/infer/forecaster.h>
#include <qtft/version.h>

#include <cstdio>
#include <exception>
#include <string>

static_assert(QTFT_VERSION >= QTFT_MAKE_VERSION(0, 1, 0), "forecast_latest needs qtft 0.1 or later");

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s MODEL.safetensors RECENT.parquet|RECENT.csv\n", argv[0]);
    return 2;
  }
  try {
    const std::string bars_path = argv[2];
    auto forecaster = qtft::infer::Forecaster::load(argv[1]);
    auto bars =
        bars_path.ends_with(".csv") ? qtft::data::read_bars_csv(bars_path) : qtft::data::read_bars_parquet(bars_path);
    auto forecasts = forecaster.forecast(bars.series);
    std::fputs(qtft::infer::format_forecasts(forecasts).c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {  // qtft::Error, with a message naming the fault
    std::fprintf(stderr, "forecast_latest: %s\n", e.what());
    return 1;
  }
}
