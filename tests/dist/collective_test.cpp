// The process group adapter: the torchrun environment is read with clear errors, and two
// Gloo ranks on loopback (threads of this process) reduce and broadcast exactly; a rank
// whose peer never comes ends with an error within its timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>

#include <chrono>
#include <map>

#include "qtft/common/error.h"
#include "qtft/dist/collective.h"
#include "qtft/dist/environment.h"
#include "support/loopback_ranks.h"

namespace qtft::dist {
namespace {

using ::testing::HasSubstr;

GetEnv from(std::map<std::string, std::string> variables) {
  return [variables](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  };
}

const std::map<std::string, std::string> kTorchrun = {
    {"WORLD_SIZE", "2"},      {"RANK", "1"},
    {"LOCAL_RANK", "1"},      {"MASTER_ADDR", "127.0.0.1"},
    {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}};

std::string usage_error(const std::map<std::string, std::string>& variables) {
  try {
    distributed_environment(from(variables));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(DistributedEnvironment, ReadsWhatTorchrunSets) {
  EXPECT_FALSE(distributed_environment(from({})).has_value());
  const auto e = distributed_environment(from(kTorchrun));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->world_size, 2);
  EXPECT_EQ(e->rank, 1);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "127.0.0.1");
  EXPECT_EQ(e->master_port, 29500);
  EXPECT_TRUE(e->launcher_hosts_store);
}

TEST(DistributedEnvironment, BadValuesNameTheVariable) {
  auto with = [](const std::string& name, const std::string& value) {
    auto v = kTorchrun;
    v[name] = value;
    return v;
  };
  EXPECT_EQ(usage_error(with("RANK", "2")), "RANK must be an integer in [0, 1], got '2'");
  EXPECT_THAT(usage_error(with("MASTER_PORT", "http")),
              HasSubstr("MASTER_PORT must be an integer in [1, 65535], got 'http'"));
  EXPECT_THAT(usage_error(with("WORLD_SIZE", "0")), HasSubstr("WORLD_SIZE must be an integer"));
  auto missing = kTorchrun;
  missing.erase("MASTER_ADDR");
  EXPECT_THAT(usage_error(missing), HasSubstr("MASTER_ADDR is not set"));
  missing = kTorchrun;
  missing.erase("RANK");
  EXPECT_THAT(usage_error(missing), HasSubstr("RANK is not set"));
}

TEST(Collective, TwoRanksReduceAndBroadcastExactly) {
  std::vector<at::Tensor> sums(2), mins(2), maxes(2), broadcast(2);
  const auto errors = test::run_loopback_ranks(2, [&](int64_t rank, int64_t port) {
    auto group = Collective::connect(test::loopback_rank(rank, 2, port), std::chrono::seconds(30));
    EXPECT_EQ(group.rank(), rank);
    EXPECT_EQ(group.world_size(), 2);
    // Values whose sum is exact in float, so that the result is known bit for bit.
    std::vector<at::Tensor> t{at::tensor({1.5f, -2.0f, 0.25f}) * static_cast<float>(rank + 1)};
    group.all_reduce(t, ReduceOp::sum);
    sums[rank] = t[0];
    std::vector<at::Tensor> lo{at::tensor({static_cast<float>(rank), 5.0f - rank})};
    group.all_reduce(lo, ReduceOp::min);
    mins[rank] = lo[0];
    std::vector<at::Tensor> hi{at::tensor({static_cast<float>(rank), 5.0f - rank})};
    group.all_reduce(hi, ReduceOp::max);
    maxes[rank] = hi[0];
    std::vector<at::Tensor> b{at::full({2, 2}, rank == 0 ? 7.0f : -1.0f)};
    group.broadcast(b, 0);
    broadcast[rank] = b[0];
    group.barrier();
  });
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(sums[rank], at::tensor({4.5f, -6.0f, 0.75f}))) << sums[rank];
    EXPECT_TRUE(at::equal(mins[rank], at::tensor({0.0f, 4.0f}))) << mins[rank];
    EXPECT_TRUE(at::equal(maxes[rank], at::tensor({1.0f, 5.0f}))) << maxes[rank];
    EXPECT_TRUE(at::equal(broadcast[rank], at::full({2, 2}, 7.0f))) << broadcast[rank];
  }
}

TEST(Collective, ARendezvousWithoutItsPeerFailsWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  try {
    Collective::connect(test::loopback_rank(0, 2, test::free_port()), std::chrono::seconds(2));
    FAIL() << "a group of two formed with one rank";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("distributed: the rendezvous at 127.0.0.1:"));
    EXPECT_THAT(e.what(), HasSubstr("rank 0 of 2"));
    // c10's backtrace stays out of the message.
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("Exception raised from")));
  }
  // The timeout is 2 s; the bound only catches a rendezvous that ignores it.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(300));
}

}  // namespace
}  // namespace qtft::dist
