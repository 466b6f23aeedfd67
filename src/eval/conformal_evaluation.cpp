#include "qtft/eval/conformal_evaluation.h"

#include <ATen/ops/cat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"

namespace qtft::eval {
namespace {

std::vector<double> flattened(const std::vector<at::Tensor>& parts) {
  if (parts.empty()) return {};
  const at::Tensor all = at::cat(parts).contiguous();
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
}

QuantileCoverage coverage_of(const std::vector<double>& quantiles, const std::vector<double>& outcomes,
                             const std::vector<double>& levels) {
  const size_t nq = levels.size();
  QuantileCoverage c;
  c.below.assign(nq, 0.0);
  double inside = 0.0, loss = 0.0;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const double y = outcomes[i];
    const double* f = quantiles.data() + i * nq;
    for (size_t k = 0; k < nq; ++k) {
      if (y <= f[k]) c.below[k] += 1.0;
      const double e = y - f[k];
      loss += std::max(levels[k] * e, (levels[k] - 1.0) * e);
    }
    if (y >= f[0] && y <= f[nq - 1]) inside += 1.0;
  }
  const auto n = static_cast<double>(outcomes.size());
  for (double& share : c.below) share /= n;
  c.interval = inside / n;
  c.loss = loss / (n * static_cast<double>(nq));
  return c;
}

nlohmann::json to_json(const QuantileCoverage& c) {
  return {{"coverage", c.below}, {"interval_coverage", c.interval}, {"loss", c.loss}};
}

}  // namespace

void check_conformal_splits(data::Split calibration, data::Split split) {
  // Offsets measured on the windows they were fitted on would promise what they cannot keep.
  if (split == calibration || split == data::Split::All) {
    throw UsageError(std::string("--conformal split fits its offsets on the ") + data::split_name(calibration) +
                     " split, so it cannot measure the " + data::split_name(split) +
                     " split: evaluate another (--split test)");
  }
}

void SplitForecasts::add(const data::Batch& batch, const model::TftOutput& output) {
  quantiles_.push_back(output.quantiles.detach().to(at::kCPU).to(at::kDouble));
  outcomes_.push_back(batch.target.to(at::kCPU).to(at::kDouble));
  windows_ += batch.size();
}

std::vector<double> SplitForecasts::quantiles() const { return flattened(quantiles_); }
std::vector<double> SplitForecasts::outcomes() const { return flattened(outcomes_); }

ConformalEvaluation evaluate_split_conformal(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                             data::Split calibration, data::Split split, const SplitForecasts& measured,
                                             size_t batch_size, c10::Device device) {
  check_conformal_splits(calibration, split);
  SplitForecasts fit;
  for_each_forecast(model, dataset, calibration, batch_size, device,
                    [&fit](const data::Batch& batch, const model::TftOutput& out) { fit.add(batch, out); });
  auto require_windows = [](const SplitForecasts& forecasts, data::Split which) {
    if (forecasts.windows() == 0) {
      throw Error(std::string("conformal: the ") + data::split_name(which) + " split has no windows");
    }
  };
  require_windows(fit, calibration);
  require_windows(measured, split);
  const auto& levels = model->options().quantiles();
  ConformalEvaluation e;
  e.offsets = fit_split_conformal(fit.quantiles(), fit.outcomes(), model->options().horizon(), levels);
  e.calibration_windows = fit.windows();
  e.windows = measured.windows();
  e.nominal_interval = levels.back() - levels.front();
  const std::vector<double> outcomes = measured.outcomes();
  std::vector<double> quantiles = measured.quantiles();
  e.raw = coverage_of(quantiles, outcomes, levels);
  apply_offsets(e.offsets, quantiles);
  e.conformal = coverage_of(quantiles, outcomes, levels);
  return e;
}

nlohmann::json to_json(const ConformalEvaluation& e) {
  return {{"method", "split"},
          {"levels", e.offsets.levels},
          {"offsets", e.offsets.offsets},
          {"calibration_windows", e.calibration_windows},
          {"windows", e.windows},
          {"nominal_interval", e.nominal_interval},
          {"raw", to_json(e.raw)},
          {"conformal", to_json(e.conformal)}};
}

}  // namespace qtft::eval
