#include "support/bar_files.h"

#include <cmath>
#include <sstream>

#include "qtft/common/format.h"

namespace qtft::test {

namespace {
constexpr int64_t kStartNs = 1704184200LL * 1'000'000'000;  // 2024-01-02T08:30:00Z
constexpr int64_t kStepNs = 300LL * 1'000'000'000;
}  // namespace

std::string regular_bars_csv(int n, const std::string& symbol) {
  std::ostringstream out;
  out << "timestamp,symbol,open,high,low,close,volume\n";
  for (int i = 0; i < n; ++i) {
    double close = 100.0 + i;
    out << format_utc(kStartNs + i * kStepNs) << "," << symbol << "," << close - 0.5 << "," << close + 1 << ","
        << close - 1 << "," << close << ",1000\n";
  }
  return out.str();
}

data::BarSet regular_bar_set(int n, int symbols) {
  data::BarSet bars;
  bars.source = "test bars";
  bars.fields = data::BarFields::all();
  for (int s = 0; s < symbols; ++s) {
    data::BarSeries series;
    series.symbol = "S" + std::to_string(s);
    for (int i = 0; i < n; ++i) {
      double close = 100.0 * (s + 1) + 2.0 * std::sin(0.3 * i + s) + 0.01 * i;
      series.timestamp_ns.push_back(kStartNs + i * kStepNs);
      series.open.push_back(close - 0.25);
      series.high.push_back(close + 0.5);
      series.low.push_back(close - 0.5);
      series.close.push_back(close);
      series.volume.push_back(1000.0 + 10.0 * (i % 7));
    }
    bars.series.push_back(std::move(series));
  }
  return bars;
}

}  // namespace qtft::test
