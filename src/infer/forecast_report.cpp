#include "qtft/infer/forecast_report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "qtft/common/format.h"

namespace qtft::infer {
namespace {

std::string interval_text(int64_t ns) {
  const int64_t seconds = ns / 1'000'000'000;
  char buf[64];
  if (seconds % 86400 == 0)
    std::snprintf(buf, sizeof buf, "%lld d", static_cast<long long>(seconds / 86400));
  else if (seconds % 3600 == 0)
    std::snprintf(buf, sizeof buf, "%lld h", static_cast<long long>(seconds / 3600));
  else if (seconds % 60 == 0)
    std::snprintf(buf, sizeof buf, "%lld min", static_cast<long long>(seconds / 60));
  else
    std::snprintf(buf, sizeof buf, "%.9g s", static_cast<double>(ns) / 1e9);
  return buf;
}

}  // namespace

std::string format_forecasts(const std::vector<Forecast>& forecasts) {
  std::string out;
  char buf[256];
  for (const auto& f : forecasts) {
    std::snprintf(buf, sizeof buf, "%s: %zu bars after %s (last close %s), ", f.symbol.c_str(), f.steps.size(),
                  format_utc(f.origin_ns).c_str(), format_number(f.origin_close).c_str());
    out += buf;
    out += f.timestamps_continued
               ? "timestamps continued at the median bar spacing of " + interval_text(f.bar_interval_ns) + "\n"
               : std::string("timestamps given\n");
    out += "  step  timestamp             ";
    for (double q : f.quantiles) {
      std::snprintf(buf, sizeof buf, " %12s", ("return_q" + format_number(q)).c_str());
      out += buf;
    }
    for (double q : f.quantiles) {
      std::snprintf(buf, sizeof buf, " %14s", ("price_q" + format_number(q)).c_str());
      out += buf;
    }
    out += "\n";
    for (size_t s = 0; s < f.steps.size(); ++s) {
      const auto& step = f.steps[s];
      std::snprintf(buf, sizeof buf, "  %4zu  %-22s", s + 1, format_utc(step.timestamp_ns).c_str());
      out += buf;
      for (double r : step.quantile_return) {
        std::snprintf(buf, sizeof buf, " %12.6f", r);
        out += buf;
      }
      for (double p : step.quantile_price) {
        std::snprintf(buf, sizeof buf, " %14.6f", p);
        out += buf;
      }
      out += "\n";
    }
  }
  return out;
}

data::ForecastTable forecast_table(const std::vector<Forecast>& forecasts) {
  data::ForecastTable t;
  t.has_actual = false;
  if (forecasts.empty()) return t;
  t.quantiles = forecasts.front().quantiles;
  t.quantile_return.resize(t.quantiles.size());
  t.quantile_price.resize(t.quantiles.size());
  for (const auto& f : forecasts) {
    for (size_t s = 0; s < f.steps.size(); ++s) {
      const auto& step = f.steps[s];
      t.timestamp_ns.push_back(step.timestamp_ns);
      t.origin_ns.push_back(f.origin_ns);
      t.symbol.push_back(f.symbol);
      t.step.push_back(static_cast<int32_t>(s + 1));
      t.origin_close.push_back(f.origin_close);
      for (size_t q = 0; q < t.quantiles.size(); ++q) {
        t.quantile_return[q].push_back(step.quantile_return[q]);
        t.quantile_price[q].push_back(step.quantile_price[q]);
      }
    }
  }
  return t;
}

nlohmann::json to_json(const Forecast& f) {
  auto steps = nlohmann::json::array();
  for (size_t s = 0; s < f.steps.size(); ++s) {
    steps.push_back({{"step", s + 1},
                     {"timestamp", format_utc(f.steps[s].timestamp_ns)},
                     {"return", f.steps[s].quantile_return},
                     {"price", f.steps[s].quantile_price}});
  }
  nlohmann::json out = {{"symbol", f.symbol},
                        {"origin", format_utc(f.origin_ns)},
                        {"origin_close", f.origin_close},
                        {"quantiles", f.quantiles},
                        {"timestamps_continued", f.timestamps_continued},
                        {"bar_interval_seconds", static_cast<double>(f.bar_interval_ns) / 1e9},
                        {"steps", steps}};
  if (!f.conformal.empty()) out["conformal"] = f.conformal;  // the quantiles carry its offsets
  return out;
}

nlohmann::json to_json(const std::vector<Forecast>& forecasts) {
  auto out = nlohmann::json::array();
  for (const auto& f : forecasts) out.push_back(to_json(f));
  return out;
}

}  // namespace qtft::infer
