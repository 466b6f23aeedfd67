#pragma once

#include <string>
#include <vector>

#include "qtft/data/bars/bars.h"

namespace qtft::test {

// A CSV of n bars for one symbol, 5 minutes apart from 2024-01-02T08:30:00Z, with closes
// 100, 101, 102, ... and high = close + 1, low = close - 1, open = close - 0.5, volume 1000.
std::string regular_bars_csv(int n, const std::string& symbol = "ES");

// A BarSet of `symbols` series with n bars each, built like regular_bars_csv but with a
// close that wiggles so that returns vary.
data::BarSet regular_bar_set(int n, int symbols = 1);

}  // namespace qtft::test
