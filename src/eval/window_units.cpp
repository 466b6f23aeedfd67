#include "qtft/eval/window_units.h"

namespace qtft::eval {

WindowUnits target_units_of(const data::Dataset& dataset, data::Split split, size_t first, size_t count) {
  WindowUnits units;
  units.scale.reserve(count);
  units.center.reserve(count);
  for (size_t i = first; i < first + count; ++i) {
    const auto& series = dataset.series()[dataset.window(split, i).series];
    const auto scaling = data::target_scaling_of(dataset.spec(), series.symbol_id);
    units.scale.push_back(scaling.scale);
    units.center.push_back(scaling.center);
  }
  return units;
}

}  // namespace qtft::eval
