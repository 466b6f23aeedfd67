#include "qtft/model/detail/philox_words.h"

#include <ATen/core/PhiloxRNGEngine.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace qtft::model::detail {
namespace {

std::vector<uint32_t> engine_words(uint64_t key, uint64_t subsequence, int64_t evaluations) {
  at::Philox4_32 engine(key, subsequence, 0);
  std::vector<uint32_t> words(static_cast<size_t>(4 * evaluations));
  for (uint32_t& w : words) w = engine();
  return words;
}

std::vector<uint32_t> batched_words(uint64_t key, uint64_t subsequence, int64_t evaluations) {
  std::vector<uint32_t> words(static_cast<size_t>(4 * evaluations) + 1, 0xdeadbeefu);
  philox_words(key, subsequence, evaluations, words.data());
  // Nothing is written past the last evaluation, even when it does not fill the eight lanes.
  EXPECT_EQ(words.back(), 0xdeadbeefu);
  words.pop_back();
  return words;
}

TEST(PhiloxWordsTest, AreTheEnginesNumbersInItsOrder) {
  // Keys and subsequences with both 32-bit halves set; counts that fill the eight lanes,
  // do not, and a dropout block's 512.
  const uint64_t keys[] = {0, 67280421310721ull, 0xfedcba9876543210ull};
  const uint64_t subsequences[] = {0, 1, 4097, 0x123456789abcdefull};
  for (uint64_t key : keys) {
    for (uint64_t subsequence : subsequences) {
      for (int64_t evaluations : {1, 7, 8, 9, 512}) {
        EXPECT_EQ(batched_words(key, subsequence, evaluations), engine_words(key, subsequence, evaluations))
            << "key " << key << ", subsequence " << subsequence << ", " << evaluations << " evaluations";
      }
    }
  }
}

TEST(PhiloxWordsTest, NoEvaluationsWriteNothingAndTooManyAreRefused) {
  uint32_t word = 7;
  philox_words(1, 2, 0, &word);
  EXPECT_EQ(word, 7u);
  EXPECT_THROW(philox_words(1, 2, (int64_t{1} << 32) + 1, &word), c10::Error);
  EXPECT_THROW(philox_words(1, 2, -1, &word), c10::Error);
}

}  // namespace
}  // namespace qtft::model::detail
