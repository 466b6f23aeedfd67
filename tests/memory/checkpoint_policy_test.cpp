#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "qtft/common/error.h"
#include "qtft/memory/checkpoint_policy.h"
#include "support/thrown.h"

namespace qtft::memory {
namespace {

using ::testing::HasSubstr;

TEST(CheckpointPolicy, NamesRoundTrip) {
  for (CheckpointPolicy p :
       {CheckpointPolicy::None, CheckpointPolicy::Blocks, CheckpointPolicy::Lstm, CheckpointPolicy::Auto}) {
    EXPECT_EQ(parse_checkpoint_policy(checkpoint_policy_name(p)), p);
  }
  EXPECT_STREQ(checkpoint_policy_name(CheckpointPolicy::None), "none");
  EXPECT_STREQ(checkpoint_policy_name(CheckpointPolicy::Blocks), "blocks");
  EXPECT_STREQ(checkpoint_policy_name(CheckpointPolicy::Lstm), "lstm");
  EXPECT_STREQ(checkpoint_policy_name(CheckpointPolicy::Auto), "auto");
}

TEST(CheckpointPolicy, RejectsUnknownNameNamingFlagAndValue) {
  EXPECT_THROW(parse_checkpoint_policy("foo"), UsageError);
  EXPECT_EQ(test::message_thrown<UsageError>([] { parse_checkpoint_policy("foo"); }),
            "--checkpoint-policy: expected none, blocks, lstm or auto, got \"foo\"");
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_checkpoint_policy(""); }), HasSubstr("got \"\""));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_checkpoint_policy("Blocks"); }), HasSubstr("got \"Blocks\""));
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
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("9223372036854775808", "--x"); }), HasSubstr("too large"));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("8388608T", "--x"); }), HasSubstr("too large"));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("99999999999999999999999999999999", "--x"); }),
              HasSubstr("too large"));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_byte_size("9223372036854775807.5K", "--x"); }), HasSubstr("too large"));
}

TEST(ParseByteSize, RejectsWhatIsNotAPositiveSize) {
  for (const char* text : {"", "-1", "-1GiB", "+1G", "nan", "NaN", "inf", "G", "GiB", "1.", ".5G", "1.G", "1e9", "4 GiB",
                           " 4GiB", "4GiB ", "4GiBs", "4Gi", "4PB", "4X", "0x10", "1,5GB", "1..5G", "abc"}) {
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

}  // namespace
}  // namespace qtft::memory
