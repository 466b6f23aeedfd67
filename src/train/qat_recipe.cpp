#include "qtft/train/qat_recipe.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"

namespace qtft::train {

namespace {
constexpr EnumNames<QatStart, 2> kQatStarts{{{QatStart::Fp32, "fp32"}, {QatStart::Scratch, "scratch"}}};
}  // namespace

QatStart parse_qat_start(const std::string& name) { return parse_enum(kQatStarts, name, "--qat-start"); }

void QatRecipe::apply_to(TrainOptions& train) {
  if (!two_phase) return;
  use_qat = true;
  const double live = live_epochs < 0 ? 1 : live_epochs;
  if (!(live > 0) || live >= static_cast<double>(train.epochs)) {
    throw UsageError("--two-phase needs --qat-live-epochs above 0 and below --epochs, got " + format_number(live) +
                     " with --epochs " + std::to_string(train.epochs));
  }
  train.freeze_observers_after_epochs = live;
}

TrainOptions TwoPhasePlan::fine_tuning(const TrainOptions& train) const {
  TrainOptions out = train;
  out.learning_rate = learning_rate;
  // Epochs are numbered through both phases; 0 freezes at calibration, not here.
  const auto qat = static_cast<double>(qat_epochs);
  out.freeze_observers_after_epochs =
      live_epochs > 0 && live_epochs < qat ? static_cast<double>(fp32_epochs) + live_epochs : 0;
  return out;
}

std::string TwoPhasePlan::describe() const {
  auto epochs = [](double n) { return format_rounded(n) + (n == 1 ? " epoch" : " epochs"); };
  std::string out = "Two-phase QAT from FP32: ";
  out += fp32_epochs > 0 ? epochs(fp32_epochs) + " FP32, then " : "the loaded FP32 model, then ";
  out += epochs(qat_epochs) + " of QAT fine-tuning (" + std::to_string(weight_bits) + "-bit weights, " +
         std::to_string(activation_bits) + "-bit activations) at learning rate " + format_rounded(learning_rate) +
         ", observers calibrated on the trained model over " + std::to_string(calibration_batches) + " batches, ";
  if (live_epochs >= static_cast<double>(qat_epochs)) return out + "live throughout";
  if (live_epochs == 0) return out + "then frozen";
  return out + "live for " + epochs(live_epochs) + ", then frozen";
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TwoPhasePlan, fp32_epochs, qat_epochs, live_epochs, learning_rate, weight_bits,
                                   activation_bits, calibration_batches)

nlohmann::json to_json(const TwoPhasePlan& plan) { return nlohmann::json(plan); }

TwoPhasePlan two_phase_plan_from_json(const nlohmann::json& json) {
  try {
    return json.get<TwoPhasePlan>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("model file: malformed two-phase QAT plan: ") + e.what());
  }
}

std::optional<TwoPhasePlan> plan_two_phase(const QatRecipe& recipe, const TrainOptions& train, bool fp32_loaded) {
  if (!recipe.two_phase || recipe.start != QatStart::Fp32) return std::nullopt;
  if (recipe.live_epochs < 0 && recipe.live_epochs != -1) throw UsageError("--qat-live-epochs must not be negative");
  if (!(recipe.fine_tune_lr_scale > 0)) {
    throw UsageError("--qat-lr-scale must be positive, got " + format_number(recipe.fine_tune_lr_scale));
  }
  TwoPhasePlan plan;
  plan.weight_bits = recipe.weight_bits;
  plan.activation_bits = recipe.activation_bits;
  plan.calibration_batches = recipe.calibration_batches;
  plan.learning_rate = train.learning_rate * recipe.fine_tune_lr_scale;
  if (fp32_loaded) {
    if (recipe.qat_epochs != 0 && recipe.qat_epochs != train.epochs) {
      throw UsageError(
          "--qat-epochs: a loaded FP32 model is the FP32 phase, so all --epochs fine-tune with QAT; "
          "drop --qat-epochs");
    }
    plan.qat_epochs = train.epochs;
  } else {
    if (train.epochs < 2) {
      throw UsageError("--two-phase trains FP32, then fine-tunes with QAT: it needs --epochs 2 or more, got " +
                       std::to_string(train.epochs) + " (or --load-model a trained FP32 model)");
    }
    int64_t qat = recipe.qat_epochs;
    if (qat == 0) {
      // Enough QAT epochs to hold the live ones and at least one step frozen.
      const auto holds_live = static_cast<int64_t>(std::floor(recipe.live_epochs)) + 1;
      qat = std::max({int64_t{1}, train.epochs / 4, holds_live});
    }
    if (qat < 1 || qat >= train.epochs) {
      throw UsageError("--qat-epochs must be between 1 and --epochs - 1 (" + std::to_string(train.epochs - 1) +
                       "), got " + std::to_string(qat) + (recipe.qat_epochs == 0 ? " (--qat-live-epochs + 1)" : ""));
    }
    plan.fp32_epochs = train.epochs - qat;
    plan.qat_epochs = qat;
  }
  plan.live_epochs = recipe.live_epochs >= 0 ? recipe.live_epochs : static_cast<double>(plan.qat_epochs) / 2;
  if (plan.live_epochs >= static_cast<double>(plan.qat_epochs)) {
    throw UsageError("--qat-live-epochs must leave part of the " + std::to_string(plan.qat_epochs) +
                     " QAT epochs frozen, got " + format_number(plan.live_epochs));
  }
  return plan;
}

}  // namespace qtft::train
