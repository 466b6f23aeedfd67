#include "qtft/infer/forecaster.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/detail/enum_names.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/dataset.h"
#include "qtft/eval/conformal.h"
#include "qtft/infer/forecast.h"
#include "qtft/io/npy_file.h"
#include "qtft/model/model_inputs.h"

namespace qtft::infer {

struct Forecaster::State {
  std::string source;
  artifact::ModelFile file;  // configuration, feature spec and windows; the weights live in the model
  model::TemporalFusionTransformer model;
  c10::Device device;
  std::string int8_kernels;
  bool conformal = false;  // the quantiles carry file.conformal's offsets
};

namespace {

// The median spacing of the bars: what "the series' regular bar interval" means when the
// caller gives no future timestamps. Session gaps are rare among the spacings, so they do
// not move the median.
int64_t median_spacing(std::span<const int64_t> t) {
  std::vector<int64_t> gaps;
  gaps.reserve(t.size());
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(t[i] - t[i - 1]);
  auto mid = gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2);
  std::nth_element(gaps.begin(), mid, gaps.end());
  return *mid;
}

// The rows one series contributes to a batch, and what its forecast reports.
struct PreparedSeries {
  data::SeriesFeatures features;  // min_bars() - 1 = encoder_length rows
  std::vector<int64_t> future_ns;
  std::vector<std::vector<double>> future_known;       // the declared known columns at future_ns
  std::vector<std::vector<std::string>> known_levels;  // the level names of the categorical ones
  Forecast forecast;
};

PreparedSeries prepare(const artifact::ModelFile& file, const data::BarSeries& recent,
                       std::span<const int64_t> future_ns, bool sole_series) {
  const auto& spec = file.features;
  const int64_t l = file.dataset.encoder_length, h = file.dataset.horizon;
  const std::string who = "forecast of '" + recent.symbol + "'";
  data::validate_series(recent, who);
  const auto need = static_cast<size_t>(l + 1);
  if (recent.size() < need) {
    throw Error(who + ": " + std::to_string(recent.size()) + " bars given, the model needs at least " +
                std::to_string(need) + " (encoder length " + std::to_string(l) +
                ", plus the bar before the first for its return and gap)");
  }
  const data::BarFields needed = spec.derived.fields_read();
  if (needed.has(data::BarField::OpenHighLow) && recent.open.empty()) {
    throw Error(who + ": the model reads open, high and low (inputs hl_range, close_open) but the bars have none");
  }
  if (needed.has(data::BarField::Volume) && recent.volume.empty()) {
    throw Error(who + ": the model reads volume (input log_volume) but the bars have none");
  }
  // Each kind's declared columns, reals then categoricals, as the bars hold them.
  const auto observed = spec.declared.observed_columns();
  const auto known = spec.declared.known_columns();
  const auto statics = spec.declared.static_columns();
  if (recent.declared_observed.size() != observed.size() || recent.declared_known.size() != known.size() ||
      recent.declared_static.size() != statics.size()) {
    throw Error(who + ": the model reads the declared columns observed [" + join_names(observed) + "], known [" +
                join_names(known) + "], static [" + join_names(statics) + "] but the bars carry " +
                std::to_string(recent.declared_observed.size()) + " observed, " +
                std::to_string(recent.declared_known.size()) + " known and " +
                std::to_string(recent.declared_static.size()) + " static declared columns");
  }
  const int64_t id = data::resolve_symbol_id(spec, recent.symbol, sole_series, who);
  const auto ahead = static_cast<size_t>(h);
  if (!recent.future_timestamp_ns.empty()) {
    if (!future_ns.empty()) {
      throw Error(who + ": the bars ahead are given twice, as future timestamps and as the series' future rows");
    }
    if (recent.future_timestamp_ns.size() < ahead) {
      throw Error(who + ": " + std::to_string(recent.future_timestamp_ns.size()) +
                  " future rows given, the model forecasts " + std::to_string(h) + " bars" +
                  (known.empty() ? "" : " and reads the declared known column '" + known.front() + "' at each"));
    }
    // A schedule may run further ahead than the horizon: the first horizon() rows are read.
    future_ns = std::span<const int64_t>(recent.future_timestamp_ns).first(ahead);
  } else if (!known.empty()) {
    throw Error(who + ": the model reads the declared known column '" + known.front() + "' at the " +
                std::to_string(h) + " bars ahead: give them as rows after the last bar with their timestamp and " +
                "known columns filled and an empty close (BarSeries::future_timestamp_ns and future_known)");
  }

  // Only the last min_bars() bars are read: every feature of a bar depends on it and the
  // bar before, so older bars cannot change the forecast.
  data::BarSeries tail = data::slice_bars(recent, recent.size() - need, recent.size());
  tail.symbol = spec.symbols[static_cast<size_t>(id)];

  PreparedSeries p;
  p.features = data::featurize_series(tail, spec, id);
  for (const auto& column : recent.future_known) p.future_known.emplace_back(column.begin(), column.begin() + h);
  p.known_levels = recent.known_levels;
  const int64_t last = tail.timestamp_ns.back();
  Forecast& f = p.forecast;
  f.symbol = tail.symbol;
  f.origin_ns = last;
  f.origin_close = p.features.close.back();  // the target column's last value (the close by default)
  f.unknown_levels = p.features.unknown_levels;
  f.quantiles = file.options.quantiles();
  f.bar_interval_ns = median_spacing(tail.timestamp_ns);
  if (future_ns.empty()) {  // neither given nor in future rows
    f.timestamps_continued = true;
    for (int64_t step = 1; step <= h; ++step) p.future_ns.push_back(last + step * f.bar_interval_ns);
  } else {
    if (static_cast<int64_t>(future_ns.size()) != h) {
      throw Error(who + ": " + std::to_string(future_ns.size()) + " future timestamps given, the model forecasts " +
                  std::to_string(h) + " bars");
    }
    int64_t previous = last;
    for (size_t i = 0; i < future_ns.size(); ++i) {
      if (future_ns[i] <= previous) {
        throw Error(who + ": future timestamp " + std::to_string(i + 1) + " (" + format_utc(future_ns[i]) +
                    ") is not after " + format_utc(previous));
      }
      previous = future_ns[i];
    }
    p.future_ns.assign(future_ns.begin(), future_ns.end());
  }
  return p;
}

}  // namespace

namespace {
constexpr EnumNames<ModelKind, 3> kModelKinds{
    {{ModelKind::Fp32, "fp32"}, {ModelKind::Qat, "qat"}, {ModelKind::Int8, "int8"}}};
}  // namespace

const char* model_kind_name(ModelKind kind) { return enum_name(kModelKinds, kind); }

Forecaster Forecaster::load(const std::filesystem::path& path, const ForecasterOptions& options) {
  const c10::Device device = artifact::resolve_device(options.device);
  auto loaded = artifact::load_model(path, device, options.int8_kernels);
  artifact::use_precision(loaded, options.precision, path.string());
  const std::string kernels = artifact::describe_int8_kernels(loaded);
  loaded.model->eval();
  loaded.model->set_checkpoint_policy(memory::CheckpointPolicy::None);
  loaded.file.weights.clear();            // the model holds them; a second copy would double the memory
  loaded.file.quantized_weights.clear();  // likewise: the integer products hold their own
  loaded.file.training.reset();
  if (!options.conformal.empty()) artifact::require_conformal(loaded.file, options.conformal, path.string());
  return Forecaster(std::make_shared<const State>(
      State{path.string(), std::move(loaded.file), loaded.model, loaded.device, kernels, !options.conformal.empty()}));
}

Forecast Forecaster::forecast(const data::BarSeries& recent, std::span<const int64_t> future_timestamps_ns) const {
  std::vector<int64_t> future(future_timestamps_ns.begin(), future_timestamps_ns.end());
  return std::move(
      forecast(std::span<const data::BarSeries>(&recent, 1), std::span<const std::vector<int64_t>>(&future, 1))
          .front());
}

struct Forecaster::PreparedBatch {
  std::vector<PreparedSeries> series;
  data::Batch batch;
};

Forecaster::PreparedBatch Forecaster::prepare_batch(std::span<const data::BarSeries> recent,
                                                    std::span<const std::vector<int64_t>> future_timestamps_ns) const {
  const State& st = *state_;
  if (!future_timestamps_ns.empty() && future_timestamps_ns.size() != recent.size()) {
    throw Error("forecast: " + std::to_string(future_timestamps_ns.size()) + " lists of future timestamps for " +
                std::to_string(recent.size()) + " series");
  }
  std::vector<PreparedSeries> prepared;
  prepared.reserve(recent.size());
  for (size_t i = 0; i < recent.size(); ++i) {
    std::span<const int64_t> future;
    if (!future_timestamps_ns.empty()) future = future_timestamps_ns[i];
    prepared.push_back(prepare(st.file, recent[i], future, recent.size() == 1));
  }

  // The batch in training's layout (data::fill_window): each window's encoder rows from its
  // bars, the decoder's known inputs from the future timestamps and declared known values.
  const auto& features = st.file.features;
  const data::BatchShape shape{static_cast<int64_t>(prepared.size()),
                               st.file.dataset.encoder_length,
                               st.file.dataset.horizon,
                               static_cast<int64_t>(features.observed.size()),
                               static_cast<int64_t>(features.known.size()),
                               static_cast<int64_t>(features.statics.size()),
                               /*with_target=*/false};
  data::Batch batch = data::empty_batch(shape);
  const int64_t b = shape.windows;
  for (int64_t i = 0; i < b; ++i) {
    auto& p = prepared[static_cast<size_t>(i)];
    std::vector<data::UnknownLevel> ahead;  // levels of the rows ahead the model has not seen
    const auto future_known =
        data::known_inputs_at(p.future_ns, p.future_known, features, p.features.symbol_id, p.known_levels, &ahead);
    auto& named = p.forecast.unknown_levels;
    for (auto& level : ahead) {
      if (std::find(named.begin(), named.end(), level) == named.end()) named.push_back(std::move(level));
    }
    data::WindowRows rows;
    rows.observed = p.features.observed;  // encoder_length rows: the bars' features
    rows.known = p.features.known;
    rows.known_ahead = future_known;
    rows.statics = p.features.statics;
    rows.symbol_id = p.features.symbol_id;
    data::fill_window(batch, shape, i, rows);
  }
  return {std::move(prepared), std::move(batch)};
}

std::vector<Forecast> Forecaster::forecast(std::span<const data::BarSeries> recent,
                                           std::span<const std::vector<int64_t>> future_timestamps_ns) const {
  const State& st = *state_;
  if (recent.empty()) return {};
  auto [prepared, batch] = prepare_batch(recent, future_timestamps_ns);
  const int64_t b = static_cast<int64_t>(prepared.size()), h = st.file.dataset.horizon;

  at::Tensor scaled;
  {
    // No autograd state and no module state is written: concurrent calls are safe.
    c10::InferenceMode inference;
    auto out = st.model.ptr()->forward(batch.observed.to(st.device), batch.known.to(st.device),
                                       batch.symbol.to(st.device), batch.statics.to(st.device));
    scaled = out.quantiles.to(at::kCPU).to(at::kDouble).contiguous();
  }
  const auto nq = static_cast<int64_t>(st.file.options.quantiles().size());
  const int64_t median = st.file.options.median_index();
  std::vector<double> returns(static_cast<size_t>(h * nq)), prices(static_cast<size_t>(h * nq));
  std::vector<Forecast> out;
  out.reserve(prepared.size());
  for (int64_t i = 0; i < b; ++i) {
    auto& p = prepared[static_cast<size_t>(i)];
    if (st.conformal) {
      const auto& calibration = *st.file.conformal;
      const std::span<double> row(scaled.data_ptr<double>() + i * h * nq, static_cast<size_t>(h * nq));
      const auto offsets = calibration.for_symbol(p.forecast.symbol, row.size());
      for (size_t k = 0; k < row.size(); ++k) row[k] += offsets[k];
      eval::sort_quantiles(row, nq);
      p.forecast.conformal = calibration.method;
    }
    to_original_units(scaled.data_ptr<double>() + i * h * nq, h, nq, median,
                      target_units(st.file.features, p.features.symbol_id), p.forecast.origin_close, returns.data(),
                      prices.data());
    for (int64_t step = 0; step < h; ++step) {
      ForecastStep s;
      s.timestamp_ns = p.future_ns[static_cast<size_t>(step)];
      s.quantile_return.assign(returns.begin() + step * nq, returns.begin() + (step + 1) * nq);
      s.quantile_price.assign(prices.begin() + step * nq, prices.begin() + (step + 1) * nq);
      p.forecast.steps.push_back(std::move(s));
    }
    out.push_back(std::move(p.forecast));
  }
  return out;
}

std::vector<std::filesystem::path> Forecaster::save_inputs(
    std::span<const data::BarSeries> recent, const std::filesystem::path& folder,
    std::span<const std::vector<int64_t>> future_timestamps_ns) const {
  if (recent.empty()) throw Error("save inputs: no series to take the inputs of");
  const auto batch = prepare_batch(recent, future_timestamps_ns).batch;
  std::vector<std::pair<const char*, at::Tensor>> inputs{
      {model::kObservedInput, batch.observed}, {model::kKnownInput, batch.known}, {model::kSymbolInput, batch.symbol}};
  if (state_->file.options.num_static() > 0) inputs.emplace_back(model::kStaticsInput, batch.statics);
  std::vector<std::filesystem::path> written;
  for (const auto& [name, tensor] : inputs) {
    written.push_back(folder / (std::string(name) + ".npy"));
    io::save_npy(written.back(), tensor);
  }
  return written;
}

int64_t Forecaster::encoder_length() const { return state_->file.dataset.encoder_length; }
int64_t Forecaster::horizon() const { return state_->file.dataset.horizon; }
int64_t Forecaster::min_bars() const { return encoder_length() + 1; }
const std::vector<double>& Forecaster::quantiles() const { return state_->file.options.quantiles(); }
const std::vector<std::string>& Forecaster::symbols() const { return state_->file.features.symbols; }
data::InputDeclaration Forecaster::inputs() const { return state_->file.features.declared; }
ModelKind Forecaster::kind() const {
  if (state_->file.int8_weights) return ModelKind::Int8;
  return state_->file.options.use_qat() ? ModelKind::Qat : ModelKind::Fp32;
}
std::string Forecaster::source() const { return state_->source; }
std::string Forecaster::int8_kernels() const { return state_->int8_kernels; }

std::string format_unknown_levels(const Forecast& forecast) {
  std::string out;
  for (size_t i = 0; i < forecast.unknown_levels.size();) {
    const std::string& input = forecast.unknown_levels[i].input;
    std::string levels;
    for (; i < forecast.unknown_levels.size() && forecast.unknown_levels[i].input == input; ++i) {
      levels += (levels.empty() ? "'" : ", '") + forecast.unknown_levels[i].level + "'";
    }
    out += "symbol '" + forecast.symbol + "': input '" + input + "' has levels the model was not trained on (" +
           levels + "): forecast from the input's unknown entry\n";
  }
  return out;
}

}  // namespace qtft::infer
