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
            "--checkpoint-policy must be none, blocks, lstm or auto, got 'foo'");
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_checkpoint_policy(""); }), HasSubstr("got ''"));
  EXPECT_THAT(test::message_thrown<UsageError>([] { parse_checkpoint_policy("Blocks"); }), HasSubstr("got 'Blocks'"));
}

}  // namespace
}  // namespace qtft::memory
