#include "qtft/eval/int8_agreement.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/quantile.h>
#include <c10/core/GradMode.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"

namespace qtft::eval {
namespace {

// The position of the 0.5 quantile among the model's levels (the middle one without it).
int64_t median_index(const std::vector<double>& levels) {
  const int64_t median = quantile_index(levels, 0.5);
  return median >= 0 ? median : static_cast<int64_t>(levels.size() / 2);
}

}  // namespace

Int8Agreement compare_int8_to_fake_quant(model::TemporalFusionTransformer& fake_quant, artifact::LoadedModel& int8,
                                         const data::Dataset& dataset, data::Split split, size_t batch_size,
                                         c10::Device device) {
  if (!int8.file.int8_weights) throw Error("compare_int8_to_fake_quant: the second model is not an int8 file");
  Int8Agreement a;
  a.integer_products = int8.integer_products.products.in_use;
  a.dense_layers = int8.integer_products.dense_layers;
  const int64_t median = median_index(int8.file.options.quantiles());
  const double step = int8.model->quantile_outputs->output_layer->output_quant->qparams().scale;
  MetricsAccumulator int8_metrics(int8.file.options.quantiles()), fake_metrics(int8.file.options.quantiles());
  std::vector<at::Tensor> differences;
  const bool was_training = fake_quant->is_training();
  fake_quant->eval();
  for_each_forecast(
      int8.model, dataset, split, batch_size, device, [&](const data::Batch& batch, const model::TftOutput& out) {
        c10::NoGradGuard no_grad;
        const at::Tensor reference = fake_quant
                                         ->forward(batch.observed.to(device), batch.known.to(device),
                                                   batch.symbol.to(device), batch.statics.to(device))
                                         .quantiles;
        const at::Tensor target = batch.target.to(out.quantiles.device());
        int8_metrics.add(out.quantiles, target);
        fake_metrics.add(reference, target);
        differences.push_back(
            at::abs(out.quantiles.select(-1, median) - reference.select(-1, median)).flatten().cpu().to(at::kDouble) /
            step);
      });
  fake_quant->train(was_training);
  a.int8 = int8_metrics.result();
  a.fake_quant = fake_metrics.result();
  a.loss_difference_pct = 100.0 * (a.int8.loss - a.fake_quant.loss) / a.fake_quant.loss;
  if (differences.empty()) return a;
  const at::Tensor all = at::cat(differences);
  a.forecasts = all.numel();
  a.identical_fraction = all.eq(0).to(at::kDouble).mean().item<double>();
  a.median_steps = at::quantile(all, 0.5).item<double>();
  a.p99_steps = at::quantile(all, 0.99).item<double>();
  a.max_steps = all.max().item<double>();
  return a;
}

std::string format_int8_agreement(const Int8Agreement& a) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "  int8 against fake quant: loss %.5f vs %.5f (%+.3f%%), %lld of %lld Dense layers in integers\n"
                "  median forecasts, |difference| in output steps over %lld values: %.1f%% identical, median %.2f, "
                "p99 %.2f, max %.2f\n",
                a.int8.loss, a.fake_quant.loss, a.loss_difference_pct, static_cast<long long>(a.integer_products),
                static_cast<long long>(a.dense_layers), static_cast<long long>(a.forecasts),
                100.0 * a.identical_fraction, a.median_steps, a.p99_steps, a.max_steps);
  return buf;
}

nlohmann::json to_json(const Int8Agreement& a) {
  return {{"int8_loss", a.int8.loss},
          {"fake_quant_loss", a.fake_quant.loss},
          {"loss_difference_pct", a.loss_difference_pct},
          {"integer_products", a.integer_products},
          {"dense_layers", a.dense_layers},
          {"median_forecast_difference_steps",
           {{"values", a.forecasts},
            {"identical_fraction", a.identical_fraction},
            {"median", a.median_steps},
            {"p99", a.p99_steps},
            {"max", a.max_steps}}}};
}

}  // namespace qtft::eval
