#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "qtft/common/calendar.h"
#include "qtft/common/format.h"
#include "qtft/common/random.h"

namespace qtft {
namespace {

TEST(FormatUtc, WritesIsoTextWithFractionOnlyWhenPresent) {
  EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_utc(1704184200LL * kNanosPerSecond), "2024-01-02T08:30:00Z");
  EXPECT_EQ(format_utc(1704184200LL * kNanosPerSecond + 250'000'000), "2024-01-02T08:30:00.25Z");
  EXPECT_EQ(format_utc(-kNanosPerSecond), "1969-12-31T23:59:59Z");
}

TEST(Calendar, DayOfWeekAndSecondsOfDay) {
  EXPECT_EQ(day_of_week(0), 3);  // 1970-01-01 was a Thursday
  EXPECT_EQ(day_of_week(1704184200LL * kNanosPerSecond), 1);  // 2024-01-02, a Tuesday
  EXPECT_EQ(seconds_of_day(1704184200LL * kNanosPerSecond), 8 * 3600 + 30 * 60);
  EXPECT_EQ(day_of_week(-kNanosPerSecond), 2);  // 1969-12-31, a Wednesday
  EXPECT_EQ(seconds_of_day(-kNanosPerSecond), 86399);
}

TEST(FormatNumber, ShortestRoundTrip) {
  EXPECT_EQ(format_number(100.25), "100.25");
  EXPECT_EQ(format_number(0.1), "0.1");
  EXPECT_EQ(format_number(-3), "-3");
  EXPECT_EQ(format_number(std::nan("")), "nan");
  EXPECT_EQ(format_number(-INFINITY), "-inf");
}

TEST(FormatShape, WritesDimensionsInBrackets) {
  EXPECT_EQ(format_shape({}), "[]");
  EXPECT_EQ(format_shape({2, 3}), "[2, 3]");
}

TEST(FormatBytes, PicksBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.0 GiB");
}

// Reference values from the published xoshiro256** and splitmix64 algorithms (computed
// independently in Python); the synthetic data and batch order rest on this stream.
TEST(Rng, MatchesReferenceXoshiro256StarStar) {
  Rng rng(42);
  EXPECT_EQ(rng.next_u64(), 1546998764402558742uLL);
  EXPECT_EQ(rng.next_u64(), 6990951692964543102uLL);
  EXPECT_EQ(rng.next_u64(), 12544586762248559009uLL);
}

TEST(Rng, BelowStaysInRangeAndCoversIt) {
  Rng rng(7);
  std::vector<int> seen(5, 0);
  for (int i = 0; i < 1000; ++i) {
    auto v = rng.below(5);
    ASSERT_LT(v, 5u);
    ++seen[v];
  }
  for (int count : seen) EXPECT_GT(count, 150);
}

TEST(Rng, NormalHasUnitMoments) {
  Rng rng(11);
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    double z = rng.normal();
    sum += z;
    sum_sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.01);
}

TEST(FormatRounded, GivesSixSignificantDigitsForPeople) {
  EXPECT_EQ(format_rounded(1e-3 * 0.1), "0.0001");  // format_number gives 0.00010000000000000002
  EXPECT_EQ(format_rounded(3e-5), "3e-05");
  EXPECT_EQ(format_rounded(0.123456789), "0.123457");
}

}  // namespace
}  // namespace qtft
