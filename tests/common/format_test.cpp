#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "qtft/common/detail/calendar.h"
#include "qtft/common/detail/random.h"
#include "qtft/common/device_choice.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "support/thrown.h"

namespace qtft {
namespace {

using ::testing::HasSubstr;

TEST(FormatUtc, WritesIsoTextWithFractionOnlyWhenPresent) {
  EXPECT_EQ(format_utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_utc(1704184200LL * kNanosPerSecond), "2024-01-02T08:30:00Z");
  EXPECT_EQ(format_utc(1704184200LL * kNanosPerSecond + 250'000'000), "2024-01-02T08:30:00.25Z");
  EXPECT_EQ(format_utc(-kNanosPerSecond), "1969-12-31T23:59:59Z");
}

TEST(Calendar, DayOfWeekAndSecondsOfDay) {
  EXPECT_EQ(day_of_week(0), 3);                               // 1970-01-01 was a Thursday
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

TEST(ParseByteSize, PlainBytes) {
  EXPECT_EQ(parse_byte_size("123456", "--x"), 123456);
  EXPECT_EQ(parse_byte_size("1", "--x"), 1);
  EXPECT_EQ(parse_byte_size("512B", "--x"), 512);
  EXPECT_EQ(parse_byte_size("512b", "--x"), 512);
  EXPECT_EQ(parse_byte_size("007", "--x"), 7);
}

TEST(ParseByteSize, BinaryUnits) {
  EXPECT_EQ(parse_byte_size("4GiB", "--x"), 4294967296);
  EXPECT_EQ(parse_byte_size("512MiB", "--x"), 536870912);
  EXPECT_EQ(parse_byte_size("800M", "--x"), 838860800);
  EXPECT_EQ(parse_byte_size("2K", "--x"), 2048);
  EXPECT_EQ(parse_byte_size("3KiB", "--x"), 3072);
  EXPECT_EQ(parse_byte_size("1G", "--x"), 1073741824);
  EXPECT_EQ(parse_byte_size("1T", "--x"), 1099511627776);
  EXPECT_EQ(parse_byte_size("2TiB", "--x"), 2199023255552);
  EXPECT_EQ(parse_byte_size("1.5GiB", "--x"), 1610612736);
  EXPECT_EQ(parse_byte_size("0.5K", "--x"), 512);
}

TEST(ParseByteSize, DecimalUnits) {
  EXPECT_EQ(parse_byte_size("1.5GB", "--x"), 1500000000);
  EXPECT_EQ(parse_byte_size("3KB", "--x"), 3000);
  EXPECT_EQ(parse_byte_size("250MB", "--x"), 250000000);
  EXPECT_EQ(parse_byte_size("2TB", "--x"), 2000000000000);
  EXPECT_EQ(parse_byte_size("0.001GB", "--x"), 1000000);
}

TEST(ParseByteSize, UnitLettersAreCaseInsensitive) {
  EXPECT_EQ(parse_byte_size("4gib", "--x"), 4294967296);
  EXPECT_EQ(parse_byte_size("4GIB", "--x"), 4294967296);
  EXPECT_EQ(parse_byte_size("800m", "--x"), 838860800);
  EXPECT_EQ(parse_byte_size("1.5gb", "--x"), 1500000000);
  EXPECT_EQ(parse_byte_size("2kb", "--x"), 2000);
}

TEST(ParseByteSize, DropsFractionsOfAByte) {
  EXPECT_EQ(parse_byte_size("0.1K", "--x"), 102);  // 102.4
  EXPECT_EQ(parse_byte_size("2.9", "--x"), 2);
  // Fraction digits past the 18th are ignored, not rejected.
  EXPECT_EQ(parse_byte_size("1.00000000000000000000000G", "--x"), 1073741824);
}

TEST(ParseByteSize, LargestValueFitsAndOneMoreOverflows) {
  EXPECT_EQ(parse_byte_size("9223372036854775807", "--x"), 9223372036854775807LL);
  EXPECT_EQ(parse_byte_size("8388607T", "--x"), 8388607LL << 40);
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("9223372036854775808", "--x"); }),
              HasSubstr("too large"));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("8388608T", "--x"); }), HasSubstr("too large"));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("99999999999999999999999999999999", "--x"); }),
              HasSubstr("too large"));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("9223372036854775807.5K", "--x"); }),
              HasSubstr("too large"));
}

TEST(ParseByteSize, RejectsWhatIsNotAPositiveSize) {
  for (const char* text :
       {"",    "-1",    "-1GiB", "+1G",   "nan",   "NaN", "inf", "G",  "GiB",  "1.",    ".5G",   "1.G",
        "1e9", "4 GiB", " 4GiB", "4GiB ", "4GiBs", "4Gi", "4PB", "4X", "0x10", "1,5GB", "1..5G", "abc"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(parse_byte_size(text, "--memory-budget"), UsageError);
    const std::string message = test::message_thrown<UsageError>([&] { parse_byte_size(text, "--memory-budget"); });
    EXPECT_THAT(message, HasSubstr("--memory-budget"));
    EXPECT_THAT(message, HasSubstr("\"" + std::string(text) + "\""));
  }
  EXPECT_EQ(test::message_thrown<UsageError>([] { parse_byte_size("4X", "--memory-budget"); }),
            "--memory-budget: expected a positive size such as 4GiB, 512MiB, 1.5GB, 800M or 123456, got \"4X\"");
}

TEST(ParseByteSize, RejectsZero) {
  for (const char* text : {"0", "0B", "0GiB", "0.0G", "000", "0.4"}) {
    SCOPED_TRACE(text);
    EXPECT_THROW(parse_byte_size(text, "--memory-budget"), UsageError);
    EXPECT_THAT(test::message_thrown<UsageError>([&] { parse_byte_size(text, "--memory-budget"); }),
                HasSubstr("--memory-budget: the size must be positive, got \"" + std::string(text) + "\""));
  }
}

TEST(EnumNames, OneTableParsesNamesAndListsTheChoicesInTheError) {
  EXPECT_EQ(parse_device_choice("auto"), DeviceChoice::Auto);
  EXPECT_EQ(parse_device_choice("cpu", "--x"), DeviceChoice::Cpu);
  EXPECT_STREQ(device_choice_name(DeviceChoice::Cuda), "cuda");
  EXPECT_EQ(test::message_thrown<UsageError>([] { parse_device_choice("gpu"); }),
            "--device must be cpu, cuda or auto, got 'gpu'");
  EXPECT_EQ(test::message_thrown<UsageError>([] { parse_device_choice("CPU", "device"); }),
            "device must be cpu, cuda or auto, got 'CPU'");
}

}  // namespace
}  // namespace qtft
