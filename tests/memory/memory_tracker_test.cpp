#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/eye.h>
#include <ATen/ops/linalg_solve.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/CPUAllocator.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <tuple>
#include <vector>

#include "qtft/common/error.h"
#include "qtft/memory/memory_tracker.h"

namespace qtft::memory {
namespace {

using ::testing::HasSubstr;

const c10::Device kCpu(c10::DeviceType::CPU);

int64_t cpu_current() { return memory_stats(kCpu).current_bytes; }

// Installation is process-wide and idempotent, so every test installs it first: the order
// in which tests run (or a filter that runs one alone) does not matter.
class MemoryTracker : public ::testing::Test {
 protected:
  void SetUp() override { install_cpu_memory_tracking(); }
};

TEST_F(MemoryTracker, InstallIsIdempotentAndReplacesTheCpuAllocator) {
  EXPECT_TRUE(cpu_memory_tracking_installed());
  at::Allocator* const installed = c10::GetCPUAllocator();
  install_cpu_memory_tracking();
  install_cpu_memory_tracking();
  EXPECT_EQ(c10::GetCPUAllocator(), installed);
  EXPECT_NE(c10::GetCPUAllocator(), c10::GetDefaultCPUAllocator());
  const int64_t before = cpu_current();
  { at::Tensor t = at::empty({16}, at::kFloat); }
  EXPECT_EQ(cpu_current(), before);  // a second install did not reset or double-count
}

TEST_F(MemoryTracker, InstallFromManyThreadsAtOnce) {
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) threads.emplace_back([] { install_cpu_memory_tracking(); });
  for (auto& t : threads) t.join();
  EXPECT_TRUE(cpu_memory_tracking_installed());
}

TEST_F(MemoryTracker, CountsExactlyTheBytesATensorHolds) {
  const int64_t before = cpu_current();
  {
    at::Tensor t = at::empty({1024}, at::kFloat);
    EXPECT_EQ(cpu_current() - before, 4096);
    at::Tensor d = at::empty({3, 5}, at::kDouble);
    EXPECT_EQ(cpu_current() - before, 4096 + 120);
  }
  EXPECT_EQ(cpu_current(), before);
}

TEST_F(MemoryTracker, DataIsAlignedAndUsable) {
  at::Tensor t = at::arange(1000, at::kFloat);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  EXPECT_EQ(t.storage().data_ptr().get(), t.storage().data_ptr().get_context());
  EXPECT_FLOAT_EQ(t.sum().item<float>(), 499500.0f);
}

TEST_F(MemoryTracker, PeakKeepsTheHighWaterMarkUntilReset) {
  reset_peak(kCpu);
  const int64_t base = cpu_current();
  EXPECT_EQ(memory_stats(kCpu).peak_bytes, base);
  {
    at::Tensor big = at::empty({1 << 20}, at::kFloat);  // 4 MiB
    EXPECT_EQ(memory_stats(kCpu).peak_bytes, base + (4 << 20));
  }
  EXPECT_EQ(cpu_current(), base);
  EXPECT_EQ(memory_stats(kCpu).peak_bytes, base + (4 << 20));
  {
    at::Tensor small = at::empty({1024}, at::kFloat);
    EXPECT_EQ(memory_stats(kCpu).peak_bytes, base + (4 << 20));  // a smaller block does not lower it
  }
  reset_peak(kCpu);
  EXPECT_EQ(memory_stats(kCpu).peak_bytes, base);
  {
    at::Tensor small = at::empty({1024}, at::kFloat);
    EXPECT_EQ(memory_stats(kCpu).peak_bytes, base + 4096);
  }
  EXPECT_EQ(memory_stats(kCpu).peak_bytes, base + 4096);
}

TEST_F(MemoryTracker, ALimitRefusesWhatWouldPassItAsCudaDoes) {
  struct Lifted {
    ~Lifted() { set_cpu_memory_limit(0); }
  } lifted;
  const int64_t base = cpu_current();
  set_cpu_memory_limit(base + (1 << 20));
  at::Tensor fits = at::empty({1 << 18}, at::kFloat);  // exactly 1 MiB: up to the limit
  EXPECT_EQ(cpu_current(), base + (1 << 20));
  EXPECT_THROW(at::empty({1}, at::kFloat), c10::OutOfMemoryError);
  EXPECT_EQ(cpu_current(), base + (1 << 20)) << "a refused block is not counted";
  set_cpu_memory_limit(0);
  at::Tensor more = at::empty({1024}, at::kFloat);
  EXPECT_EQ(cpu_current(), base + (1 << 20) + 4096);
  EXPECT_THROW(set_cpu_memory_limit(-1), Error);
}

TEST_F(MemoryTracker, OnTheCpuReservedIsWhatIsHeld) {
  const auto stats = memory_stats(kCpu);
  EXPECT_EQ(stats.reserved_bytes, stats.current_bytes);
  EXPECT_EQ(stats.peak_reserved_bytes, stats.peak_bytes);
}

TEST_F(MemoryTracker, ZeroSizeTensorsWork) {
  const int64_t before = cpu_current();
  {
    at::Tensor empty = at::empty({0}, at::kFloat);
    at::Tensor empty2 = at::empty({4, 0, 3}, at::kDouble);
    EXPECT_EQ(cpu_current(), before);
    at::Tensor joined = at::cat({empty, at::ones({2}, at::kFloat)});
    EXPECT_EQ(joined.numel(), 2);
    empty.resize_({8});                         // a zero-byte storage grows through the allocator
    EXPECT_EQ(cpu_current() - before, 8 + 32);  // joined (8 bytes) + resized (32 bytes)
    at::Tensor raw = at::empty({0}, at::kFloat);
    raw.resize_({0});
    EXPECT_EQ(empty2.sum().item<double>(), 0.0);
  }
  EXPECT_EQ(cpu_current(), before);
}

TEST_F(MemoryTracker, RawAllocateAndDeallocateAgree) {
  const int64_t before = cpu_current();
  at::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  void* p = allocator->raw_allocate(100);
  std::memset(p, 1, 100);
  EXPECT_EQ(cpu_current() - before, 100);
  allocator->raw_deallocate(p);
  EXPECT_EQ(cpu_current(), before);
  void* z = allocator->raw_allocate(0);
  allocator->raw_deallocate(z);
  EXPECT_EQ(cpu_current(), before);
}

TEST_F(MemoryTracker, CloneCopiesThroughTheAllocator) {
  at::Allocator* allocator = c10::GetCPUAllocator();
  const int64_t before = cpu_current();
  {
    c10::DataPtr a = allocator->allocate(16);
    std::memset(a.get(), 7, 16);
    c10::DataPtr b = allocator->clone(a.get(), 16);
    EXPECT_EQ(std::memcmp(a.get(), b.get(), 16), 0);
    EXPECT_EQ(cpu_current() - before, 32);
  }
  EXPECT_EQ(cpu_current(), before);
}

TEST_F(MemoryTracker, EveryBlockOfCommonOpsIsReturned) {
  const int64_t before = cpu_current();
  {
    at::Tensor a = at::randn({64, 32});
    at::Tensor b = at::randn({32, 48});
    at::Tensor c = at::matmul(a, b);
    at::Tensor d = at::cat({c, c}, 0);
    at::Tensor e = at::stack({a, a});
    at::Tensor f = d.t().contiguous();
    at::Tensor g = at::softmax(f, 1);
    at::Tensor h = std::get<0>(at::sort(g.flatten()));
    at::Tensor i = at::bmm(e, at::randn({2, 32, 8}));
    at::Tensor j = at::linalg_solve(at::eye(16) * 2 + at::randn({16, 16}) * 0.01, at::randn({16, 3}));
    at::Tensor k = at::nonzero(g > 0.05);
    at::Tensor l = std::get<0>(at::topk(h, 5));
    at::Tensor m = at::empty({10});
    m.resize_({1000});
    m.resize_({10});
    at::Tensor n = at::repeat_interleave(at::arange(4), 3);
    at::Tensor o = at::where(a > 0, a, at::zeros_like(a)).to(at::kDouble);
    EXPECT_GT(cpu_current(), before);
  }
  EXPECT_EQ(cpu_current(), before);
}

// oneDNN (through ideep) allocates its buffers with the CPU allocator's raw_allocate and
// frees them with raw_deallocate, which calls raw_deleter() on a bare pointer: the path that
// needs the data pointer to be the context.
TEST_F(MemoryTracker, OneDnnBuffersGoThroughTheRawPath) {
  if (!at::hasMKLDNN()) GTEST_SKIP() << "LibTorch built without oneDNN";
  at::Tensor dense = at::randn({64, 64});
  at::Tensor image = at::randn({2, 3, 32, 32});
  at::Tensor kernel = at::randn({8, 3, 3, 3});
  const int64_t before = cpu_current();
  {
    at::Tensor opaque = dense.to_mkldnn();
    EXPECT_GE(cpu_current() - before, 64 * 64 * 4);
    at::Tensor back = opaque.to_dense();
    EXPECT_TRUE(at::equal(back, dense));
    at::Tensor features = at::conv2d(image, kernel);
    EXPECT_EQ(features.sizes(), (at::IntArrayRef{2, 8, 30, 30}));
  }
  EXPECT_EQ(cpu_current(), before);
}

TEST_F(MemoryTracker, OtherDevicesAreRejectedByName) {
  const c10::Device meta(c10::DeviceType::Meta);
  EXPECT_THROW(memory_stats(meta), Error);
  try {
    memory_stats(meta);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("meta"));
  }
  EXPECT_THROW(reset_peak(c10::Device(c10::DeviceType::XPU, 0)), Error);
}

TEST_F(MemoryTracker, CudaWithoutADeviceIsAnErrorNotACrash) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present";
  const c10::Device cuda(c10::DeviceType::CUDA, 0);
  EXPECT_THROW(memory_stats(cuda), Error);
  EXPECT_THROW(reset_peak(cuda), Error);
  try {
    memory_stats(cuda);
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cuda:0"));
  }
}

TEST_F(MemoryTracker, CudaCountsATensorAndResetsItsPeak) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const c10::Device cuda(c10::DeviceType::CUDA, 0);
  reset_peak(cuda);
  const int64_t before = memory_stats(cuda).current_bytes;
  {
    at::Tensor t = at::empty({1 << 20}, at::TensorOptions().dtype(at::kFloat).device(cuda));
    EXPECT_EQ(memory_stats(cuda).current_bytes - before, 4 << 20);
  }
  EXPECT_EQ(memory_stats(cuda).current_bytes, before);
  EXPECT_GE(memory_stats(cuda).peak_bytes, before + (4 << 20));
  reset_peak(cuda);
  EXPECT_EQ(memory_stats(cuda).peak_bytes, before);
}

}  // namespace
}  // namespace qtft::memory
