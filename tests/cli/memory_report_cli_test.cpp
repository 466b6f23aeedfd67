// `qtft memory-report` as users run it: JSON with every row measured, QAT observers
// counted only with --use-qat, and policies that cannot be compared refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;

// The embedded data, a tiny model: the command must work without --parquet-file.
const std::string kTiny =
    "memory-report --device cpu --hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4 "
    "--batch-size 8 --timed-steps 1";

nlohmann::json report(const test::TempDir& dir, const std::string& extra) {
  auto run = run_qtft(dir, kTiny + " --json" + extra);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  return nlohmann::json::parse(run.out);
}

void expect_measured(const nlohmann::json& j, const std::string& column, bool qat) {
  SCOPED_TRACE(column);
  const auto& c = j.at(column);
  for (const char* key :
       {"weights_bytes", "gradients_bytes", "optimizer_bytes", "activation_peak_bytes", "total_peak_bytes"}) {
    EXPECT_GT(c.at(key).get<int64_t>(), 0) << key;
  }
  if (qat) {
    EXPECT_GT(c.at("observer_bytes").get<int64_t>(), 0);
  } else {
    EXPECT_EQ(c.at("observer_bytes").get<int64_t>(), 0);
  }
  EXPECT_GE(c.at("total_peak_bytes").get<int64_t>(), c.at("weights_bytes").get<int64_t>() +
                                                         c.at("gradients_bytes").get<int64_t>() +
                                                         c.at("optimizer_bytes").get<int64_t>());
  EXPECT_GT(c.at("step_seconds").get<double>(), 0.0);
}

TEST(MemoryReportCli, JsonHasEveryRowForBothColumns) {
  test::TempDir dir;
  auto j = report(dir, "");
  EXPECT_EQ(j.at("policy"), "blocks");
  expect_measured(j, "without", false);
  expect_measured(j, "with", false);
  EXPECT_GT(j.at("step_time_ratio").get<double>(), 0.0);
  for (const char* key :
       {"total_peak_bytes", "total_peak_percent", "activation_peak_bytes", "activation_peak_percent"}) {
    EXPECT_TRUE(j.at("savings").contains(key)) << key;
  }
  EXPECT_EQ(j.at("config").at("hidden_size"), 8);
  EXPECT_EQ(j.at("config").at("batch_size"), 8);
  EXPECT_EQ(j.at("config").at("use_qat"), false);
}

TEST(MemoryReportCli, QatObserversAreCounted) {
  test::TempDir dir;
  auto j = report(dir, " --use-qat --checkpoint-policy lstm");
  EXPECT_EQ(j.at("policy"), "lstm");
  expect_measured(j, "without", true);
  expect_measured(j, "with", true);
}

TEST(MemoryReportCli, PrintsTheConfigurationAndTable) {
  test::TempDir dir;
  auto run = run_qtft(dir, kTiny);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("encoder 16, horizon 4, hidden 8, heads 2, batch 8"));
  EXPECT_THAT(run.out, HasSubstr("QAT off, device cpu"));
  EXPECT_THAT(run.out, HasSubstr("without checkpointing"));
  EXPECT_THAT(run.out, HasSubstr("with blocks"));
  EXPECT_THAT(run.out, HasSubstr("total peak"));
}

TEST(MemoryReportCli, RefusesPoliciesItCannotCompare) {
  test::TempDir dir;
  for (const char* policy : {"auto", "none"}) {
    auto run = run_qtft(dir, kTiny + " --checkpoint-policy " + policy);
    EXPECT_EQ(run.exit_code, 2) << policy;
    EXPECT_THAT(run.err, HasSubstr("--checkpoint-policy")) << policy;
  }
  auto run = run_qtft(dir, kTiny + " --timed-steps 0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--timed-steps"));
}

}  // namespace
}  // namespace qtft
