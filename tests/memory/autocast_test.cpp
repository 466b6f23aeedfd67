// --precision bf16's parts: the CPU's features as Linux lists them, the refusal where bf16
// would not pay, autocast scopes that put the caller's settings back, a checkpoint's
// recompute in the forward's types, and the dropout kernel in bf16.
#include <ATen/autocast_mode.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memory/bitwise.h"
#include "qtft/common/cpu_features.h"
#include "qtft/common/error.h"
#include "qtft/common/precision.h"
#include "qtft/memory/autocast.h"
#include "qtft/memory/checkpoint.h"
#include "qtft/memory/detail/bit_mask.h"
#include "support/thrown.h"

namespace qtft::memory {
namespace {

using ::testing::HasSubstr;

const char* const kSapphireRapids =
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\n"
    "flags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n\n"
    "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C\nflags\t\t: fpu\n";
const char* const kEpycGenoa = "model name\t: AMD EPYC 9654\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n";
const char* const kAvx2Only = "model name\t: Intel(R) Xeon(R) CPU E5-2690 v4\nflags\t\t: fpu avx avx2 fma\n";

TEST(CpuFeatures, ReadsTheFirstProcessorsNameAndBf16Flags) {
  const CpuBf16Features spr = cpu_bf16_features_from(kSapphireRapids);
  EXPECT_EQ(spr.cpu_name, "Intel(R) Xeon(R) Platinum 8481C");
  EXPECT_TRUE(spr.avx512_bf16);
  EXPECT_TRUE(spr.amx_bf16);
  const CpuBf16Features epyc = cpu_bf16_features_from(kEpycGenoa);
  EXPECT_TRUE(epyc.avx512_bf16);
  EXPECT_FALSE(epyc.amx_bf16);
  EXPECT_FALSE(cpu_bf16_features_from(kAvx2Only).any());
  // A flag's name inside another's does not count.
  EXPECT_FALSE(cpu_bf16_features_from("flags : avx512_bf16x amx_bf16_2\n").any());
  EXPECT_EQ(cpu_bf16_features_from("").cpu_name, "this CPU");
}

TEST(Precision, NamesParseAndAnythingElseIsAUsageErrorNamingTheValue) {
  EXPECT_EQ(parse_precision("bf16"), Precision::Bf16);
  EXPECT_EQ(parse_precision("fp32"), Precision::Fp32);
  EXPECT_STREQ(precision_name(Precision::Bf16), "bf16");
  const std::string message = test::message_thrown<UsageError>([] { parse_precision("fp16"); });
  EXPECT_THAT(message, HasSubstr("--precision"));
  EXPECT_THAT(message, HasSubstr("'fp16'"));
}

TEST(Precision, Bf16OnACpuWithoutBf16InstructionsIsRefusedNamingWhatIsMissing) {
  const c10::Device cpu(c10::kCPU);
  const auto avx2 = cpu_bf16_features_from(kAvx2Only);
  const std::string message =
      test::message_thrown<UsageError>([&] { require_precision_support(Precision::Bf16, cpu, avx2); });
  EXPECT_THAT(message, HasSubstr("Intel(R) Xeon(R) CPU E5-2690 v4"));
  EXPECT_THAT(message, HasSubstr("avx512_bf16"));
  EXPECT_THAT(message, HasSubstr("amx_bf16"));
  EXPECT_THAT(message, HasSubstr("--precision fp32"));
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
  // FP32 always; bf16 with either feature; a GPU decides for itself.
  EXPECT_NO_THROW(require_precision_support(Precision::Fp32, cpu, avx2));
  EXPECT_NO_THROW(require_precision_support(Precision::Bf16, cpu, cpu_bf16_features_from(kEpycGenoa)));
  EXPECT_NO_THROW(require_precision_support(Precision::Bf16, c10::Device(c10::kCUDA, 0), avx2));
}

TEST(AutocastScope, SetsBf16ForItsDeviceTypeAndPutsTheCallersSettingsBack) {
  const AutocastState before = AutocastState::current();
  ASSERT_FALSE(before.cpu_enabled);
  {
    const AutocastScope scope(AutocastState::with_precision(Precision::Bf16, c10::DeviceType::CPU));
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
    EXPECT_FALSE(at::autocast::is_autocast_enabled(c10::DeviceType::CUDA));
    EXPECT_EQ(at::autocast::get_autocast_dtype(c10::DeviceType::CPU), at::kBFloat16);
    EXPECT_FALSE(at::autocast::is_autocast_cache_enabled());
    const at::Tensor x = at::randn({4, 8});
    EXPECT_EQ(at::linear(x, at::randn({3, 8})).scalar_type(), at::kBFloat16);
    {
      // An inner FP32 state, as a caller may open one, then back to the outer.
      const AutocastScope inner(before);
      EXPECT_EQ(at::linear(x, at::randn({3, 8})).scalar_type(), at::kFloat);
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(c10::DeviceType::CPU));
  }
  EXPECT_TRUE(AutocastState::current() == before);
  // FP32 changes nothing.
  EXPECT_TRUE(AutocastState::with_precision(Precision::Fp32, c10::DeviceType::CPU, before) == before);
  const auto cuda = AutocastState::with_precision(Precision::Bf16, c10::DeviceType::CUDA, before);
  EXPECT_TRUE(cuda.cuda_enabled);
  EXPECT_FALSE(cuda.cpu_enabled);
}

TEST(AutocastScope, FullPrecisionWidensReducedTypesOnly) {
  const at::Tensor half = at::randn({5}).to(at::kBFloat16);
  EXPECT_EQ(full_precision(half).scalar_type(), at::kFloat);
  EXPECT_TRUE(test::bitwise_equal(full_precision(half), half.to(at::kFloat)));
  const at::Tensor f32 = at::randn({5});
  EXPECT_TRUE(full_precision(f32).is_same(f32));
  const at::Tensor f64 = at::randn({5}, at::kDouble);
  EXPECT_TRUE(full_precision(f64).is_same(f64));
}

TEST(Checkpoint, TheRecomputeMultipliesInTheForwardsAutocastTypes) {
  // A segment of two bf16 products. Recomputed in FP32 (the backward runs outside the
  // forward's autocast region), its gradients would be FP32 products' and differ.
  const at::Tensor w1 = at::randn({16, 8}).requires_grad_(true), w2 = at::randn({4, 16}).requires_grad_(true);
  const SegmentFunction fn = [&](const std::vector<at::Tensor>& in) {
    return std::vector<at::Tensor>{at::linear(at::linear(in[0], w1).relu(), w2)};
  };
  const at::Tensor x = at::randn({32, 8}).requires_grad_(true);
  auto gradients = [&](bool checkpointed) {
    for (const at::Tensor& t : {w1, w2, x}) t.mutable_grad() = at::Tensor();
    at::Tensor out;
    {
      const AutocastScope bf16(AutocastState::with_precision(Precision::Bf16, c10::DeviceType::CPU));
      out = run_segment("two products", checkpointed, {x}, fn)[0];
    }
    EXPECT_EQ(out.scalar_type(), at::kBFloat16);
    out.to(at::kFloat).pow(2).sum().backward();
    return std::vector<at::Tensor>{w1.grad().clone(), w2.grad().clone(), x.grad().clone()};
  };
  const auto plain = gradients(false), checkpointed = gradients(true);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_TRUE(test::bitwise_equal(plain[i], checkpointed[i])) << i;
  EXPECT_FALSE(AutocastState::current().cpu_enabled) << "the recompute left autocast on";
}

TEST(BitMask, Bf16MultipliesInFloatAndRoundsOnce) {
  const int64_t n = 1003;  // a tail shorter than a byte of bits
  const at::Tensor x = at::randn({n}).to(at::kBFloat16);
  const at::Tensor bits = at::randint(0, 256, {(n + 7) / 8}, at::TensorOptions().dtype(at::kByte));
  const double keep = 0.9;
  const at::Tensor out = detail::multiply_by_bits(x, bits, keep);
  ASSERT_EQ(out.scalar_type(), at::kBFloat16);
  const float scale = 1.0f / static_cast<float>(keep);
  std::vector<float> mask(static_cast<size_t>(n));
  const auto* b = bits.data_ptr<uint8_t>();
  for (int64_t e = 0; e < n; ++e) mask[static_cast<size_t>(e)] = ((b[e / 8] >> (e % 8)) & 1u) != 0 ? scale : 0.0f;
  const at::Tensor expected = at::mul(x.to(at::kFloat), at::from_blob(mask.data(), {n}, at::kFloat)).to(at::kBFloat16);
  EXPECT_TRUE(test::bitwise_equal(out, expected));
}

}  // namespace
}  // namespace qtft::memory
