#include "qtft/data/bars/synthetic.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/detail/random.h"
#include "qtft/common/error.h"

namespace qtft::data {
namespace {

struct Instrument {
  const char* symbol;
  double price;        // starting price
  double bar_vol;      // typical 5-minute log-return volatility
  double base_volume;  // typical contracts per 5-minute bar
};

constexpr std::array<Instrument, 6> kInstruments{{
    {"ES", 4750.0, 0.0009, 18000},
    {"NQ", 16800.0, 0.0012, 9000},
    {"CL", 72.5, 0.0018, 6000},
    {"GC", 2050.0, 0.0008, 4000},
    {"ZN", 110.5, 0.0003, 12000},
    {"6E", 1.095, 0.0004, 7000},
}};

constexpr int64_t kSessionOpenMinute = 8 * 60 + 30;    // 08:30
constexpr int64_t kSessionCloseMinute = 15 * 60 + 15;  // 15:15, last bar opens before
constexpr int64_t kFirstDay = 19724;                   // 2024-01-02, a Tuesday

// Volatility regimes and how sticky they are per bar (a regime lasts days on average).
constexpr std::array<double, 3> kRegimeVol{0.6, 1.0, 2.1};
constexpr double kRegimeStay = 0.997;

// U-shaped intraday profile: busy after the open and before the close.
double intraday_profile(double session_fraction) {
  return 0.75 + 0.9 * std::exp(-session_fraction / 0.07) + 0.5 * std::exp(-(1.0 - session_fraction) / 0.06);
}

// Fat tails without a Student-t: one draw in twenty-five comes from a wider normal.
double fat_tailed(Rng& rng) {
  double z = rng.normal();
  return rng.uniform() < 0.04 ? 2.5 * z : z;
}

// The scheduled releases: 10:00 UTC, on the days a hash of the date picks (about a third),
// alike for every symbol and seed, as an economic calendar is.
constexpr int64_t kReleaseMinute = 10 * 60;
bool release_day(int64_t day) { return mix_seed(0x5eedca1e, static_cast<uint64_t>(day)) % 3 == 0; }
// How much more volatile a bar is, `after` bars after a release (0: the release bar).
double release_volatility(int64_t after) { return 1.0 + 2.0 * std::exp(-static_cast<double>(after) / 2.0); }
constexpr int64_t kReleaseBars = 8;

int next_regime(Rng& rng, int regime) {
  if (rng.uniform() < kRegimeStay) return regime;
  // Leave to a neighbouring regime, more often towards normal.
  if (regime == 1) return rng.uniform() < 0.5 ? 0 : 2;
  return 1;
}

BarSeries generate_series(const Instrument& inst, const std::string& symbol, int64_t rows,
                          const SyntheticOptions& options, Rng& rng) {
  const int bar_minutes = options.bar_minutes;
  BarSeries s;
  s.symbol = symbol;
  const int64_t bars_per_day = (kSessionCloseMinute - kSessionOpenMinute) / bar_minutes;
  double log_price = std::log(inst.price);
  double anchor = log_price;  // slow moving average the price reverts to
  double trend = 0.0;         // persistent drift per bar
  double last_return = 0.0;
  int regime = 1;
  int64_t day = kFirstDay;
  int64_t bar_in_day = 0;
  const bool releases = options.extra_inputs >= 2;
  const int64_t release_bar = (kReleaseMinute - kSessionOpenMinute) / bar_minutes;
  if (releases) s.declared_known.emplace_back().reserve(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    if (bar_in_day == bars_per_day) {
      bar_in_day = 0;
      do ++day;
      while ((day + 3) % 7 >= 5);  // skip Saturday and Sunday
    }
    double fraction = static_cast<double>(bar_in_day) / static_cast<double>(bars_per_day);
    regime = next_regime(rng, regime);
    double vol = inst.bar_vol * kRegimeVol[regime] * intraday_profile(fraction);
    // The regime change scales what the draws make, never how many there are, so the bars
    // before it do not move.
    const bool shifted = options.shift_after_bar > 0 && i >= options.shift_after_bar;
    if (shifted) vol *= options.shift_volatility;
    if (releases) {
      const int64_t after = bar_in_day - release_bar;
      const bool today = release_day(day);
      if (today && after >= 0 && after < kReleaseBars) vol *= release_volatility(after);
      s.declared_known[0].push_back(today && after == 0 ? 1.0 : 0.0);
    }

    trend = 0.995 * trend + 0.02 * inst.bar_vol * rng.normal();
    double reversion = -0.01 * (log_price - anchor);
    double mean = trend + reversion + 0.06 * last_return;
    if (shifted) mean += options.shift_drift * vol;
    double open = log_price;
    if (bar_in_day == 0 && i > 0) {
      // Overnight news: the session opens away from the previous close.
      open += 3.0 * inst.bar_vol * kRegimeVol[regime] * fat_tailed(rng);
    }
    // Four sub-steps trace the path inside the bar for its high and low.
    double path = open, high = open, low = open;
    for (int k = 0; k < 4; ++k) {
      path += mean / 4.0 + 0.5 * vol * fat_tailed(rng);
      high = std::max(high, path);
      low = std::min(low, path);
    }
    high += 0.15 * vol * std::abs(rng.normal());
    low -= 0.15 * vol * std::abs(rng.normal());
    double close = path;
    last_return = close - log_price;
    log_price = close;
    anchor += 0.002 * (log_price - anchor);

    double activity =
        intraday_profile(fraction) * kRegimeVol[regime] * (0.6 + 0.4 * std::abs(last_return) / (vol + 1e-12));
    double volume = std::round(inst.base_volume * activity * std::exp(0.25 * rng.normal()));

    int64_t minute = kSessionOpenMinute + bar_in_day * bar_minutes;
    s.timestamp_ns.push_back((day * kSecondsPerDay + minute * 60) * kNanosPerSecond);
    s.open.push_back(std::exp(open));
    s.high.push_back(std::exp(high));
    s.low.push_back(std::exp(low));
    s.close.push_back(std::exp(close));
    s.volume.push_back(std::max(volume, 1.0));
    ++bar_in_day;
  }
  return s;
}

// The observed extra columns of a generated series, from a stream of their own so that the
// bars do not depend on how many there are.
void add_observed_extras(BarSeries& s, const Instrument& inst, const SyntheticOptions& options, int k) {
  const int64_t noise_columns = std::max(0, options.extra_inputs - 3);
  Rng rng(mix_seed(mix_seed(options.seed, 0xe47a5), static_cast<uint64_t>(k)));
  const size_t n = s.size();
  auto& lead = s.declared_observed.emplace_back(n);
  for (size_t i = 0; i < n; ++i) {
    const double next = i + 1 < n ? std::log(s.close[i + 1] / s.close[i]) / inst.bar_vol : 0.0;
    lead[i] = 0.7 * next + std::sqrt(0.51) * rng.normal();
  }
  for (int64_t c = 0; c < noise_columns; ++c) {
    auto& noise = s.declared_observed.emplace_back(n);
    double x = 0.0;
    for (size_t i = 0; i < n; ++i) noise[i] = x = 0.9 * x + std::sqrt(1 - 0.81) * rng.normal();
  }
}

std::vector<std::string> extra_observed_names(int extra_inputs) {
  std::vector<std::string> names;
  if (extra_inputs >= 1) names.push_back("lead_signal");
  const int noise = std::max(0, extra_inputs - 3);
  const int digits = noise > 100 ? 3 : 2;
  for (int c = 0; c < noise; ++c) {
    std::string number = std::to_string(c);
    names.push_back("f" + std::string(static_cast<size_t>(std::max(0, digits - static_cast<int>(number.size()))), '0') +
                    number);
  }
  return names;
}

}  // namespace

BarSet generate_synthetic_symbol(const SyntheticOptions& options, int k) {
  if (options.symbols < 1) throw UsageError("--symbols must be at least 1");
  if (options.rows < options.symbols) throw UsageError("--rows must be at least the number of symbols");
  if (options.bar_minutes < 1 || options.bar_minutes > 60) throw UsageError("--bar-minutes must be in 1..60");
  if (options.shift_after_bar < 0) throw UsageError("--shift-after-bar must not be negative");
  if (!(options.shift_volatility > 0)) throw UsageError("--shift-volatility must be positive");
  if (!std::isfinite(options.shift_drift)) throw UsageError("--shift-drift must be a finite number");
  if (options.extra_inputs < 0 || options.extra_inputs > 1000)
    throw UsageError("--extra-inputs must be in 0..1000, got " + std::to_string(options.extra_inputs));
  BarSet bars;
  bars.source = "embedded synthetic data";
  bars.fields = BarFields::all();
  const auto& inst = kInstruments[static_cast<size_t>(k) % kInstruments.size()];
  std::string symbol = inst.symbol;
  if (k >= static_cast<int>(kInstruments.size())) symbol += std::to_string(k / kInstruments.size() + 1);
  // Every symbol has its own stream, so adding symbols leaves the first ones unchanged.
  Rng rng(mix_seed(options.seed, static_cast<uint64_t>(k)));
  int64_t rows = options.rows / options.symbols + (k < options.rows % options.symbols ? 1 : 0);
  bars.series.push_back(generate_series(inst, symbol, rows, options, rng));
  if (options.extra_inputs >= 1) {
    add_observed_extras(bars.series.back(), inst, options, k);
    bars.declared.observed = extra_observed_names(options.extra_inputs);
  }
  if (options.extra_inputs >= 2) bars.declared.known = {"event_flag"};
  if (options.extra_inputs >= 3) {
    // A static category: which of two volatility classes the instrument trades in.
    auto& s = bars.series.back();
    s.declared_static.emplace_back(s.size(), 0.0);
    s.static_levels.push_back({inst.bar_vol >= 0.0009 ? "high" : "low"});
    bars.declared.static_categorical = {"vol_class"};
  }
  return bars;
}

BarSet generate_synthetic_bars(const SyntheticOptions& options) {
  BarSet bars = generate_synthetic_symbol(options, 0);
  for (int k = 1; k < options.symbols; ++k)
    bars.series.push_back(std::move(generate_synthetic_symbol(options, k).series[0]));
  return bars;
}

}  // namespace qtft::data
