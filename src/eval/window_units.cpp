#include "qtft/eval/window_units.h"

namespace qtft::eval {

WindowUnits target_units_of(const data::Dataset& dataset, data::Split split, size_t first, size_t count) {
  std::vector<data::WindowRef> windows;
  windows.reserve(count);
  for (size_t i = first; i < first + count; ++i) windows.push_back(dataset.window(split, i));
  return target_units_of(dataset, windows);
}

WindowUnits target_units_of(const data::Dataset& dataset, std::span<const data::WindowRef> windows) {
  WindowUnits units;
  units.scale.reserve(windows.size());
  units.center.reserve(windows.size());
  for (const auto& window : windows) {
    const auto& series = dataset.series()[window.series];
    const auto scaling = data::target_scaling_of(dataset.schema(), series.symbol_id);
    units.scale.push_back(scaling.scale);
    units.center.push_back(scaling.center);
  }
  return units;
}

}  // namespace qtft::eval
