#include "qtft/model/detail/philox_words.h"

#include <c10/util/Exception.h>

#include <algorithm>

namespace qtft::model::detail {
namespace {

// The Philox4x32-10 constants, as at::Philox4_32 uses them.
constexpr uint32_t kRoundKeyA = 0x9E3779B9;
constexpr uint32_t kRoundKeyB = 0xBB67AE85;
constexpr uint32_t kMultiplierA = 0xD2511F53;
constexpr uint32_t kMultiplierB = 0xCD9E8D57;
constexpr int kRounds = 10;
// Counters evaluated side by side: two AVX2 multiplies' worth of lanes.
constexpr int kLanes = 8;

// Counters (first + j, 0, subsequence) for j < kLanes, through the ten rounds, each lane's
// four words stored at out[4 * j, 4 * j + 4). Structure of arrays, so that each statement
// of a round is one vector operation over the lanes.
__attribute__((target_clones("avx2", "default"))) void evaluate_lanes(uint32_t key_low, uint32_t key_high,
                                                                      uint32_t subsequence_low,
                                                                      uint32_t subsequence_high, uint32_t first,
                                                                      uint32_t* out) {
  uint32_t c0[kLanes], c1[kLanes], c2[kLanes], c3[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    c0[j] = first + static_cast<uint32_t>(j);
    c1[j] = 0;
    c2[j] = subsequence_low;
    c3[j] = subsequence_high;
  }
  uint32_t k0 = key_low;
  uint32_t k1 = key_high;
  for (int round = 0; round < kRounds; ++round) {
    for (int j = 0; j < kLanes; ++j) {
      const uint64_t product_a = static_cast<uint64_t>(kMultiplierA) * c0[j];
      const uint64_t product_b = static_cast<uint64_t>(kMultiplierB) * c2[j];
      const uint32_t next0 = static_cast<uint32_t>(product_b >> 32) ^ c1[j] ^ k0;
      const uint32_t next2 = static_cast<uint32_t>(product_a >> 32) ^ c3[j] ^ k1;
      c0[j] = next0;
      c1[j] = static_cast<uint32_t>(product_b);
      c2[j] = next2;
      c3[j] = static_cast<uint32_t>(product_a);
    }
    k0 += kRoundKeyA;
    k1 += kRoundKeyB;
  }
  for (int j = 0; j < kLanes; ++j) {
    out[4 * j] = c0[j];
    out[4 * j + 1] = c1[j];
    out[4 * j + 2] = c2[j];
    out[4 * j + 3] = c3[j];
  }
}

}  // namespace

void philox_words(uint64_t key, uint64_t subsequence, int64_t evaluations, uint32_t* words) {
  TORCH_CHECK(evaluations >= 0 && evaluations <= (int64_t{1} << 32), "philox_words: ", evaluations,
              " evaluations do not fit one subsequence's low counter word");
  const auto key_low = static_cast<uint32_t>(key);
  const auto key_high = static_cast<uint32_t>(key >> 32);
  const auto subsequence_low = static_cast<uint32_t>(subsequence);
  const auto subsequence_high = static_cast<uint32_t>(subsequence >> 32);
  uint32_t lanes[4 * kLanes];
  for (int64_t first = 0; first < evaluations; first += kLanes) {
    const int64_t count = std::min<int64_t>(kLanes, evaluations - first);
    uint32_t* out = count == kLanes ? words + 4 * first : lanes;
    evaluate_lanes(key_low, key_high, subsequence_low, subsequence_high, static_cast<uint32_t>(first), out);
    if (count < kLanes) std::copy(lanes, lanes + 4 * count, words + 4 * first);
  }
}

}  // namespace qtft::model::detail
