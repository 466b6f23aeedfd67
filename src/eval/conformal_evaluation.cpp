#include "qtft/eval/conformal_evaluation.h"

#include <ATen/ops/cat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>

#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"

namespace qtft::eval {
namespace {

// A split's scaled quantiles [windows, horizon, levels] and outcomes [windows, horizon].
struct SplitForecasts {
  std::vector<double> quantiles, outcomes;
  int64_t windows = 0;
};

SplitForecasts forecast_split(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                              size_t batch_size, c10::Device device) {
  std::vector<at::Tensor> quantiles, outcomes;
  for_each_forecast(model, dataset, split, batch_size, device,
                    [&](const data::Batch& batch, const model::TftOutput& out) {
                      quantiles.push_back(out.quantiles.detach().to(at::kCPU).to(at::kDouble));
                      outcomes.push_back(batch.target.to(at::kCPU).to(at::kDouble));
                    });
  if (quantiles.empty()) {
    throw Error(std::string("conformal: the ") + data::split_name(split) + " split has no windows");
  }
  const at::Tensor q = at::cat(quantiles).contiguous(), y = at::cat(outcomes).contiguous();
  return {std::vector<double>(q.data_ptr<double>(), q.data_ptr<double>() + q.numel()),
          std::vector<double>(y.data_ptr<double>(), y.data_ptr<double>() + y.numel()), q.size(0)};
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

ConformalEvaluation evaluate_split_conformal(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                             data::Split calibration, data::Split split, size_t batch_size,
                                             c10::Device device) {
  check_conformal_splits(calibration, split);
  const auto& levels = model->options().quantiles();
  const int64_t horizon = model->options().horizon();
  const SplitForecasts fit = forecast_split(model, dataset, calibration, batch_size, device);
  SplitForecasts measured = forecast_split(model, dataset, split, batch_size, device);
  ConformalEvaluation e;
  e.offsets = fit_split_conformal(fit.quantiles, fit.outcomes, horizon, levels);
  e.calibration_windows = fit.windows;
  e.windows = measured.windows;
  e.nominal_interval = levels.back() - levels.front();
  e.raw = coverage_of(measured.quantiles, measured.outcomes, levels);
  apply_offsets(e.offsets, measured.quantiles);
  e.conformal = coverage_of(measured.quantiles, measured.outcomes, levels);
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
