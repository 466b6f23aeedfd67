#include "qtft/data/bars.h"

namespace qtft::data {

size_t BarSet::total_rows() const {
  size_t n = 0;
  for (const auto& s : series) n += s.size();
  return n;
}

}  // namespace qtft::data
