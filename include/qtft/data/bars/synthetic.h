#pragma once

#include <cstdint>

#include "qtft/data/bars/bars.h"

namespace qtft::data {

// The embedded default data set: deterministic synthetic intraday futures bars.
struct SyntheticOptions {
  int64_t rows = 40'000;  // bars in all, shared evenly by the symbols
  int symbols = 2;
  uint64_t seed = 20240102;
  int bar_minutes = 5;
  // A regime change: from this bar of each series on (0: none), volatility is multiplied by
  // shift_volatility and every bar drifts by shift_drift times its volatility. The bars
  // before it are bitwise those of the same options without a shift, and fewer rows give a
  // prefix of more: old and new bars of one market.
  int64_t shift_after_bar = 0;
  double shift_volatility = 2.0;
  double shift_drift = 0.1;
  // Extra columns beside the bars (BarSet::declared), for trying
  // declared inputs: in this order, as many as asked for,
  //   lead_signal  observed: 0.7 x the next bar's return in units of the symbol's typical
  //                volatility, plus noise of variance 0.51; it leads the target
  //   event_flag   known: 1 at a scheduled release (10:00 UTC on a third of the days, the same
  //                days for every symbol), 0 elsewhere; the release bar and the few after it
  //                are up to 3x as volatile, so the bars themselves change with it
  //   vol_class    static categorical: 'high' for the instruments whose typical volatility is
  //                0.0009 a bar or more (ES, NQ, CL), 'low' for the others; it tells the
  //                scale of a symbol's returns
  //   f00, f01...  observed: AR(1) noise (coefficient 0.9), no signal
  // With none (the default) the bars are the embedded data's, bitwise.
  int extra_inputs = 0;
};

// Bars with the structure real futures show, so that a forecaster has something to learn:
//  - regime-switching volatility (calm / normal / stressed, a persistent Markov chain);
//  - intraday seasonality: volatility and volume high at the open and close (U shape);
//  - a slowly drifting trend plus mean reversion towards a moving anchor, and a little
//    bar-to-bar momentum;
//  - session gaps: trading 08:30-15:15 UTC on weekdays, with an overnight jump in price;
//  - open/high/low/close from a sub-bar random walk; volume tied to activity.
// Same options, same bars, on every machine (qtft::Rng, no std:: distributions).
BarSet generate_synthetic_bars(const SyntheticOptions& options);
// Symbol k of those bars alone (bitwise its series in generate_synthetic_bars), so that a
// large data set can be written one symbol at a time.
BarSet generate_synthetic_symbol(const SyntheticOptions& options, int k);

}  // namespace qtft::data
