#include "qtft/quant/activation_observer.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/fused_moving_avg_obs_fake_quant.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "qtft/common/error.h"

namespace qtft::quant {
namespace {

using test::literal;

// A 1-D float tensor of the given values.
at::Tensor vec(std::initializer_list<double> v) { return literal(v, {static_cast<int64_t>(v.size())}); }

const std::vector<std::string> kBufferNames = {"running_min", "running_max", "scale",
                                               "zero_point",  "samples",     "frozen"};

at::Tensor buffer(const ActivationFakeQuant& observer, const std::string& name) {
  return observer->named_buffers()[name];
}

float value(const ActivationFakeQuant& observer, const std::string& name) {
  return buffer(observer, name).item<float>();
}

std::map<std::string, at::Tensor> snapshot(const ActivationFakeQuant& observer) {
  std::map<std::string, at::Tensor> copy;
  for (const auto& item : observer->named_buffers()) copy[item.key()] = item.value().clone();
  return copy;
}

// Byte-for-byte: "unchanged" must not hide a -0.0 or a NaN payload behind ==.
bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

void expect_state_unchanged(const ActivationFakeQuant& observer, const std::map<std::string, at::Tensor>& before) {
  for (const auto& [name, tensor] : before) EXPECT_TRUE(same_bytes(buffer(observer, name), tensor)) << name;
}

// One observation step of ATen's moving average, in float as the kernel computes it.
float moved(float running, float batch, double averaging_constant) {
  const auto c = static_cast<float>(averaging_constant);
  return running + c * (batch - running);
}

void expect_qparams_from_running_range(const ActivationFakeQuant& observer) {
  const QParams expected = affine_qparams(value(observer, "running_min"), value(observer, "running_max"), 0, 255);
  EXPECT_EQ(observer->qparams().scale, expected.scale);
  EXPECT_EQ(observer->qparams().zero_point, expected.zero_point);
}

TEST(ActivationFakeQuantTest, BuffersHaveReadableNamesAndInitialValues) {
  ActivationFakeQuant observer;
  std::vector<std::string> names;
  for (const auto& item : observer->named_buffers()) names.push_back(item.key());
  EXPECT_EQ(names, kBufferNames);
  EXPECT_EQ(value(observer, "running_min"), std::numeric_limits<float>::infinity());
  EXPECT_EQ(value(observer, "running_max"), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(buffer(observer, "scale").scalar_type(), at::kFloat);
  EXPECT_EQ(buffer(observer, "zero_point").scalar_type(), at::kInt);
  EXPECT_EQ(buffer(observer, "samples").scalar_type(), at::kLong);
  EXPECT_EQ(buffer(observer, "frozen").scalar_type(), at::kBool);
  EXPECT_EQ(observer->samples(), 0);
  EXPECT_FALSE(observer->is_frozen());
  EXPECT_TRUE(observer->parameters().empty());

  // Inside a model the names follow the module tree.
  torch::nn::Module parent;
  parent.register_module("fc1", ActivationFakeQuant());
  EXPECT_TRUE(parent.named_buffers().contains("fc1.scale"));
  EXPECT_TRUE(parent.named_buffers().contains("fc1.samples"));
}

TEST(ActivationFakeQuantTest, MovingAverageByHand) {
  ActivationFakeQuant observer;  // averaging constant 0.01
  observer->train();
  // Step 1: the first observation replaces the infinite bounds outright: [-1, 3], so scale
  // 4/255 and zero point 64.
  observer(vec({-1, 3, 0.5}));
  EXPECT_EQ(value(observer, "running_min"), -1.0f);
  EXPECT_EQ(value(observer, "running_max"), 3.0f);
  EXPECT_EQ(observer->qparams().scale, static_cast<double>(static_cast<float>(4.0 / 255.0)));
  EXPECT_EQ(observer->qparams().zero_point, 64);

  // Step 2: batch [-2, 5]: min -1 + 0.01 (-2 + 1) = -1.01, max 3 + 0.01 (5 - 3) = 3.02.
  observer(vec({-2, 5, 1}));
  float min = moved(-1.0f, -2.0f, 0.01), max = moved(3.0f, 5.0f, 0.01);
  EXPECT_NEAR(min, -1.01f, 1e-6);
  EXPECT_NEAR(max, 3.02f, 1e-6);
  EXPECT_EQ(value(observer, "running_min"), min);
  EXPECT_EQ(value(observer, "running_max"), max);
  expect_qparams_from_running_range(observer);

  // Step 3: batch [0.5, 1]: min -1.01 + 0.01 (0.5 + 1.01) = -0.9949, max 3.02 + 0.01 (1 - 3.02) = 2.9998.
  observer(vec({0.5, 1}));
  min = moved(min, 0.5f, 0.01), max = moved(max, 1.0f, 0.01);
  EXPECT_NEAR(min, -0.9949f, 1e-6);
  EXPECT_NEAR(max, 2.9998f, 1e-6);
  EXPECT_EQ(value(observer, "running_min"), min);
  EXPECT_EQ(value(observer, "running_max"), max);
  expect_qparams_from_running_range(observer);
  EXPECT_EQ(observer->samples(), 3);
}

// The observer hands ATen's fused op only x's min and max, and fake-quantizes x itself:
// state and output must be bitwise what the fused op gives on the whole of x.
TEST(ActivationFakeQuantTest, BitwiseWhatAtenFusedOpGivesOnTheWholeTensor) {
  ActivationFakeQuant observer(ActivationFakeQuantOptions().averaging_constant(0.05));
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  at::Tensor running_min = at::full({1}, std::numeric_limits<float>::infinity(), f32);
  at::Tensor running_max = at::full({1}, -std::numeric_limits<float>::infinity(), f32);
  at::Tensor scale = at::ones({1}, f32);
  at::Tensor zero_point = at::zeros({1}, at::TensorOptions().dtype(at::kInt));
  const at::Tensor on = at::ones({1}, at::TensorOptions().dtype(at::kLong));
  for (int step = 0; step < 6; ++step) {
    const at::Tensor x = at::randn({64, 37}, f32) * (1.0 + step) + 0.3 * step;
    const at::Tensor aten_out = at::fused_moving_avg_obs_fake_quant(x, on, on, running_min, running_max, scale,
                                                                    zero_point, 0.05, 0, 255, 0, false, false);
    const at::Tensor ours = observer(x);
    EXPECT_TRUE(same_bytes(ours, aten_out)) << "step " << step;
    EXPECT_TRUE(same_bytes(buffer(observer, "running_min"), running_min)) << "step " << step;
    EXPECT_TRUE(same_bytes(buffer(observer, "running_max"), running_max)) << "step " << step;
    EXPECT_TRUE(same_bytes(buffer(observer, "scale"), scale)) << "step " << step;
    EXPECT_TRUE(same_bytes(buffer(observer, "zero_point"), zero_point)) << "step " << step;
  }
}

TEST(ActivationFakeQuantTest, AveragingConstantIsAnOption) {
  ActivationFakeQuant observer(ActivationFakeQuantOptions().averaging_constant(0.5));
  observer(vec({-1, 3}));
  observer(vec({-3, 1}));
  // min -1 + 0.5 (-3 + 1) = -2, max 3 + 0.5 (1 - 3) = 2.
  EXPECT_EQ(value(observer, "running_min"), -2.0f);
  EXPECT_EQ(value(observer, "running_max"), 2.0f);
}

TEST(ActivationFakeQuantTest, OutputUsesTheParametersAfterTheUpdate) {
  ActivationFakeQuant observer;
  const at::Tensor x1 = at::randn({64}), x2 = at::randn({64}) * 3;
  observer(x1);
  const at::Tensor out = observer(x2);
  const QParams p = observer->qparams();
  EXPECT_TRUE(same_bytes(out, fake_quantize_reference(x2, p.scale, p.zero_point, 0, 255)));
  // The fixed-parameter path (eval) gives the same bits for the same parameters: what a
  // recompute replay relies on.
  observer->eval();
  EXPECT_TRUE(same_bytes(observer(x2), out));
}

TEST(ActivationFakeQuantTest, StepModeQuantizesWithTheStepsParametersAndUpdatesOnceAtItsEnd) {
  ActivationFakeQuant observer;  // averaging constant 0.01
  observer->train();
  observer(vec({-1, 3, 0.5}));  // immediate: [-1, 3]
  const QParams start = observer->qparams();
  const auto before = snapshot(observer);
  observer->set_update(ObserverUpdate::Step);
  EXPECT_FALSE(observer->step_extremes().defined());
  // Two forwards of one step: both quantize with the step's starting parameters, and
  // neither moves the state.
  const at::Tensor x1 = vec({-2, 5, 1}), x2 = vec({-4, 2});
  EXPECT_TRUE(same_bytes(observer(x1), fake_quantize_reference(x1, start.scale, start.zero_point, 0, 255)));
  EXPECT_TRUE(same_bytes(observer(x2), fake_quantize_reference(x2, start.scale, start.zero_point, 0, 255)));
  expect_state_unchanged(observer, before);
  // The step's record is the min and max over both: [-4, 5].
  EXPECT_TRUE(same_bytes(observer->step_extremes(), vec({-4, 5})));
  // Its end takes one batch in: min -1 + 0.01 (-4 + 1), max 3 + 0.01 (5 - 3).
  observer->end_step(observer->step_extremes());
  EXPECT_EQ(value(observer, "running_min"), moved(-1.0f, -4.0f, 0.01));
  EXPECT_EQ(value(observer, "running_max"), moved(3.0f, 5.0f, 0.01));
  expect_qparams_from_running_range(observer);
  EXPECT_EQ(observer->samples(), 2);
  EXPECT_FALSE(observer->step_extremes().defined());
  // Eval forwards record nothing; a frozen observer refuses a step's end.
  observer->eval();
  observer(vec({-9, 9}));
  EXPECT_FALSE(observer->step_extremes().defined());
  observer->freeze();
  EXPECT_THROW(observer->end_step(vec({-1, 1})), Error);
  observer->unfreeze();
  // Back to immediate: a step's unfinished record is dropped, and end_step is refused.
  observer->train();
  observer(vec({-9, 9}));
  observer->set_update(ObserverUpdate::Immediate);
  EXPECT_FALSE(observer->step_extremes().defined());
  EXPECT_THROW(observer->end_step(vec({-1, 1})), Error);
}

TEST(ActivationFakeQuantTest, StepModeBeforeAnyObservationPassesThroughAndRecords) {
  ActivationFakeQuant observer;
  observer->train();
  observer->set_update(ObserverUpdate::Step);
  const at::Tensor x = vec({-1, 3, 0.5});
  EXPECT_TRUE(same_bytes(observer(x), x));
  observer->end_step(observer->step_extremes());
  EXPECT_EQ(value(observer, "running_min"), -1.0f);
  EXPECT_EQ(value(observer, "running_max"), 3.0f);
  EXPECT_EQ(observer->samples(), 1);
}

TEST(ActivationFakeQuantTest, SamplesCountTrainingForwardsAndCalibration) {
  ActivationFakeQuant observer;
  for (int i = 0; i < 3; ++i) observer->calibrate(at::randn({8}));
  EXPECT_EQ(observer->samples(), 3);
  observer->train();
  for (int i = 0; i < 5; ++i) observer(at::randn({8}));
  EXPECT_EQ(observer->samples(), 8);
  observer->eval();
  observer(at::randn({8}));
  EXPECT_EQ(observer->samples(), 8);
  // Calibration observes in eval mode too (PTQ calibrates an evaluated model).
  observer->calibrate(at::randn({8}));
  EXPECT_EQ(observer->samples(), 9);
}

TEST(ActivationFakeQuantTest, CalibrateCarriesNoGradient) {
  ActivationFakeQuant observer;
  const at::Tensor x = at::randn({8}).requires_grad_(true);
  const at::Tensor out = observer->calibrate(x);
  EXPECT_FALSE(out.requires_grad());
  EXPECT_EQ(observer->samples(), 1);
}

TEST(ActivationFakeQuantTest, FreezeStopsEveryUpdate) {
  ActivationFakeQuant observer;
  observer->train();
  observer(vec({-1, 3}));
  observer(vec({-2, 4}));
  observer->freeze();
  EXPECT_TRUE(observer->is_frozen());
  const auto before = snapshot(observer);
  const QParams p = observer->qparams();
  for (int i = 0; i < 4; ++i) {
    const at::Tensor x = at::randn({32}) * 10;
    const at::Tensor out = observer(x);
    EXPECT_TRUE(same_bytes(out, fake_quantize_reference(x, p.scale, p.zero_point, 0, 255)));
  }
  expect_state_unchanged(observer, before);
  EXPECT_EQ(observer->samples(), 2);
  EXPECT_THROW(observer->calibrate(at::randn({4})), Error);
  expect_state_unchanged(observer, before);

  observer->unfreeze();
  observer(vec({-5, 5}));
  EXPECT_EQ(observer->samples(), 3);
  EXPECT_NE(value(observer, "running_min"), before.at("running_min").item<float>());
}

TEST(ActivationFakeQuantTest, EvalModeQuantizesWithoutUpdating) {
  ActivationFakeQuant observer;
  observer(vec({-1, 3}));
  observer->eval();
  const auto before = snapshot(observer);
  // Fixed parameters [-1, 3]: 5 clamps to 191 s, -2 to -64 s.
  const float s = static_cast<float>(4.0 / 255.0);
  const at::Tensor out = observer(vec({5, -2, 0}));
  EXPECT_EQ(out[0].item<float>(), 191 * s);
  EXPECT_EQ(out[1].item<float>(), -64 * s);
  EXPECT_EQ(out[2].item<float>(), 0.0f);
  expect_state_unchanged(observer, before);
}

TEST(ActivationFakeQuantTest, NeverObservedPassesThrough) {
  // Negative values would be clipped to 0 by ATen's stand-in parameters (scale 0.1, zero
  // point 0); an observer that has seen nothing leaves x alone instead.
  const at::Tensor x = vec({-1.234, 5.678});
  ActivationFakeQuant observer;
  observer->eval();
  EXPECT_TRUE(same_bytes(observer(x), x));
  observer->train();
  observer->freeze();
  EXPECT_TRUE(same_bytes(observer(x), x));
  EXPECT_EQ(observer->samples(), 0);
}

TEST(ActivationFakeQuantTest, StraightThroughGradientMasksClampedValues) {
  ActivationFakeQuant observer;
  observer(vec({-1, 3}));
  // Range moves only to [-1.01, 3.02]: -2 and 5 are clamped and get no gradient.
  const at::Tensor x = vec({-2, -0.5, 0, 1, 2.5, 5}).requires_grad_(true);
  observer(x).sum().backward();
  const QParams p = observer->qparams();
  const at::Tensor mask = fake_quantize_reference_mask(x.detach(), p.scale, p.zero_point, 0, 255);
  EXPECT_TRUE(same_bytes(x.grad(), mask));
  EXPECT_TRUE(same_bytes(mask, vec({0, 1, 1, 1, 1, 0})));

  // Frozen: the same rule with the fixed parameters.
  observer->freeze();
  const at::Tensor y = vec({-2, 0.5, 4}).requires_grad_(true);
  observer(y).sum().backward();
  EXPECT_TRUE(same_bytes(y.grad(), vec({0, 1, 0})));
}

TEST(ActivationFakeQuantTest, CalledTwiceInOneStepStillBackpropagates) {
  // A layer used at several time steps calls its observer several times before backward;
  // each call updates the buffers in place, which autograd would reject if a backward
  // formula had saved them (it saves only the mask).
  ActivationFakeQuant observer;
  const at::Tensor x = at::randn({16}).requires_grad_(true);
  const at::Tensor first = observer(x);
  const at::Tensor second = observer(x * 2);
  observer->freeze();
  const at::Tensor third = observer(x * 3);
  observer->unfreeze();
  observer(x);  // updates scale and zero point after the frozen call read them
  EXPECT_NO_THROW((first + second + third).sum().backward());
  EXPECT_TRUE(x.grad().defined());
  EXPECT_EQ(observer->samples(), 3);
}

TEST(ActivationFakeQuantTest, BuffersRestoreToIdenticalOutputs) {
  ActivationFakeQuant trained;
  for (int i = 0; i < 4; ++i) trained(at::randn({16}) * (i + 1));
  trained->freeze();

  ActivationFakeQuant restored;
  {
    c10::NoGradGuard no_grad;
    auto target = restored->named_buffers();
    for (const auto& item : trained->named_buffers()) target[item.key()].copy_(item.value());
  }
  EXPECT_EQ(restored->samples(), 4);
  EXPECT_TRUE(restored->is_frozen());
  EXPECT_EQ(restored->qparams().scale, trained->qparams().scale);
  EXPECT_EQ(restored->qparams().zero_point, trained->qparams().zero_point);
  const at::Tensor x = at::randn({128}) * 5;
  trained->eval();
  restored->eval();
  EXPECT_TRUE(same_bytes(restored(x), trained(x)));
  // Frozen in training mode as well.
  trained->train();
  restored->train();
  EXPECT_TRUE(same_bytes(restored(x), trained(x)));
}

TEST(ActivationFakeQuantTest, RejectsBadOptionsAndInputs) {
  try {
    ActivationFakeQuant observer(ActivationFakeQuantOptions().bits(4));
    FAIL() << "4-bit activations were accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--activation-bits"), std::string::npos);
  }
  EXPECT_THROW(ActivationFakeQuant(ActivationFakeQuantOptions().averaging_constant(0.0)), UsageError);
  EXPECT_THROW(ActivationFakeQuant(ActivationFakeQuantOptions().averaging_constant(1.5)), UsageError);
  ActivationFakeQuant observer;
  EXPECT_THROW(observer(at::randn({4}).to(at::kDouble)), c10::Error);
  EXPECT_THROW(observer(at::randn({0})), c10::Error);
  EXPECT_EQ(observer->samples(), 0);
}

// Copies every buffer of `from` into `to` in place, as loading a model file does.
void copy_buffers(const ActivationFakeQuant& from, ActivationFakeQuant& to) {
  for (const auto& item : to->named_buffers()) {
    c10::NoGradGuard no_grad;
    item.value().copy_(buffer(from, item.key()));
  }
}

TEST(ActivationFakeQuantTest, HostStateFollowsBuffersWrittenFromOutside) {
  ActivationFakeQuant calibrated;
  const at::Tensor x = at::randn({16, 5}) * 2.0;
  calibrated->calibrate(x);
  calibrated->calibrate(x + 1.0);
  calibrated->freeze();
  ActivationFakeQuant loaded;
  // Read once, so that the host copies hold the fresh state before the load.
  ASSERT_FALSE(loaded->is_frozen());
  ASSERT_EQ(loaded->samples(), 0);
  copy_buffers(calibrated, loaded);
  EXPECT_TRUE(loaded->is_frozen());
  EXPECT_EQ(loaded->samples(), 2);
  loaded->train();
  const auto before = snapshot(loaded);
  EXPECT_TRUE(same_bytes(loaded(x * 3.0), calibrated(x * 3.0)));
  expect_state_unchanged(loaded, before);  // frozen: training mode observes nothing

  // Back to a never-observed state: x passes through unchanged again.
  copy_buffers(ActivationFakeQuant(), loaded);
  EXPECT_FALSE(loaded->is_frozen());
  EXPECT_EQ(loaded->samples(), 0);
  loaded->eval();
  EXPECT_TRUE(same_bytes(loaded(x), x));
  // The observer's own writes keep the copies current.
  loaded->train();
  loaded(x);
  EXPECT_EQ(loaded->samples(), 1);
  loaded->freeze();
  EXPECT_TRUE(loaded->is_frozen());
  loaded->unfreeze();
  EXPECT_FALSE(loaded->is_frozen());
}

}  // namespace
}  // namespace qtft::quant
