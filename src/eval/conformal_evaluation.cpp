#include "qtft/eval/conformal_evaluation.h"

#include <ATen/ops/cat.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"
#include "qtft/eval/window_units.h"

namespace qtft::eval {
namespace {

std::vector<double> flattened(const std::vector<at::Tensor>& parts) {
  if (parts.empty()) return {};
  const at::Tensor all = at::cat(parts).contiguous();
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
}

QuantileCoverage coverage_of(const std::vector<double>& quantiles, const std::vector<double>& outcomes,
                             const std::vector<double>& levels) {
  CoverageTally tally(levels);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    tally.add(std::span<const double>(quantiles).subspan(i * levels.size(), levels.size()), outcomes[i]);
  }
  return tally.result();
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

QuantileCoverage coverage_of(const SplitForecasts& forecasts, const std::vector<double>& levels) {
  return coverage_of(forecasts.quantiles(), forecasts.outcomes(), levels);
}

FittedOffsets fit_split_offsets(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                data::Split calibration, size_t batch_size, c10::Device device) {
  SplitForecasts fit;
  for_each_forecast(model, dataset, calibration, batch_size, device,
                    [&fit](const data::Batch& batch, const model::TftOutput& out) { fit.add(batch, out); });
  if (fit.windows() == 0) {
    throw Error(std::string("conformal: the ") + data::split_name(calibration) + " split has no windows");
  }
  return {
      fit_split_conformal(fit.quantiles(), fit.outcomes(), model->options().horizon(), model->options().quantiles()),
      fit.windows()};
}

ConformalEvaluation evaluate_split_conformal(model::TemporalFusionTransformer& model, const data::Dataset& dataset,
                                             data::Split calibration, data::Split split, const SplitForecasts& measured,
                                             size_t batch_size, c10::Device device) {
  check_conformal_splits(calibration, split);
  if (measured.windows() == 0) {
    throw Error(std::string("conformal: the ") + data::split_name(split) + " split has no windows");
  }
  auto fitted = fit_split_offsets(model, dataset, calibration, batch_size, device);
  const auto& levels = model->options().quantiles();
  ConformalEvaluation e;
  e.offsets = std::move(fitted.offsets);
  e.calibration_windows = fitted.windows;
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
          {"raw", to_json(e.raw, false)},
          {"conformal", to_json(e.conformal, false)}};
}

at::Tensor with_conformal_offsets(const artifact::ConformalCalibration& calibration, const data::Dataset& dataset,
                                  const data::Batch& batch, const at::Tensor& quantiles) {
  // A copy always: quantiles already on the CPU in double would otherwise be moved in place.
  at::Tensor moved = quantiles.detach().to(at::kCPU, at::kDouble, /*non_blocking=*/false, /*copy=*/true).contiguous();
  const int64_t per_window = moved.size(1) * moved.size(2);
  double* values = moved.data_ptr<double>();
  for (size_t b = 0; b < batch.windows.size(); ++b) {
    const std::span<double> row(values + static_cast<int64_t>(b) * per_window, static_cast<size_t>(per_window));
    const auto offsets = calibration.for_symbol(dataset.series()[batch.windows[b].series].symbol, row.size());
    for (size_t k = 0; k < row.size(); ++k) row[k] += offsets[k];
    sort_quantiles(row, moved.size(2));
  }
  return moved.to(quantiles.device(), quantiles.scalar_type());
}

FixedConformalTallies::FixedConformalTallies(artifact::ConformalCalibration calibration,
                                             const std::vector<double>& levels)
    : calibration_(std::move(calibration)), raw_(levels), conformal_(levels) {}

at::Tensor FixedConformalTallies::add(const data::Dataset& dataset, const data::Batch& batch,
                                      const at::Tensor& quantiles) {
  const auto units = target_units_of(dataset, batch.windows);
  const at::Tensor raw = quantiles.detach().to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor issued = with_conformal_offsets(calibration_, dataset, batch, raw);
  const at::Tensor target = batch.target.to(at::kCPU, at::kDouble).contiguous();
  const auto steps = static_cast<size_t>(raw.size(0) * raw.size(1));
  const auto levels = static_cast<size_t>(raw.size(2));
  const double* r = raw.data_ptr<double>();
  const double* c = issued.data_ptr<double>();
  const double* y = target.data_ptr<double>();
  const auto horizon = static_cast<size_t>(raw.size(1));
  for (size_t i = 0; i < steps; ++i) {
    const double scale = units.scale[i / horizon];
    raw_.add(std::span<const double>(r + i * levels, levels), y[i], scale);
    conformal_.add(std::span<const double>(c + i * levels, levels), y[i], scale);
  }
  return issued;
}

}  // namespace qtft::eval
