#pragma once

#include <cstdint>

namespace qtft {

// A small, fully specified generator (xoshiro256** seeded through splitmix64) with our own
// uniform and normal transforms. std:: distributions are implementation-defined, and the
// synthetic data and batch order must be identical on every platform and compiler.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  double uniform();                // [0, 1), 53 random bits
  double normal();                 // standard normal, Box-Muller
  uint64_t below(uint64_t bound);  // uniform in [0, bound), unbiased (Lemire)

 private:
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// Mixes several values into one seed (for per-epoch and per-symbol streams).
uint64_t mix_seed(uint64_t a, uint64_t b);

}  // namespace qtft
