#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "qtft/common/error.h"
#include "qtft/memory/block_checkpointing.h"
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

TEST(BlockCheckpointing, EachPolicyNamesTheBlocksItRecomputes) {
  const BlockCheckpointing none(CheckpointPolicy::None), blocks(CheckpointPolicy::Blocks), lstm(CheckpointPolicy::Lstm);
  for (const char* block : {"static_covariates", "input_embedding", "selected_variable", "lstm_decoder", "attention",
                            "output", "lstm_encoder", "lstm_encoder_chunk"}) {
    SCOPED_TRACE(block);
    EXPECT_FALSE(none.checkpoints(block));
  }
  // Blocks recomputes the encoder LSTM as one block, Lstm chunk by chunk; both every other block.
  EXPECT_TRUE(blocks.checkpoints("lstm_encoder"));
  EXPECT_FALSE(blocks.checkpoints("lstm_encoder_chunk"));
  EXPECT_FALSE(lstm.checkpoints("lstm_encoder"));
  EXPECT_TRUE(lstm.checkpoints("lstm_encoder_chunk"));
  for (const char* block : {"static_covariates", "selection_weights", "post_lstm_gate", "attention", "output"}) {
    SCOPED_TRACE(block);
    EXPECT_TRUE(blocks.checkpoints(block));
    EXPECT_TRUE(lstm.checkpoints(block));
  }
  EXPECT_THAT(test::message_thrown<Error>([] { BlockCheckpointing{CheckpointPolicy::Auto}; }),
              HasSubstr("must be resolved"));
}

}  // namespace
}  // namespace qtft::memory
