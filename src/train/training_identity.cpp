// What the data and a training setup decide of the models trained from them, as JSON: the
// record a backtest or a search resumes under only when it is the same.
#include <nlohmann/json.hpp>

#include "qtft/common/format.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/model/tft_options.h"
#include "qtft/train/workflow.h"

namespace qtft::train {

nlohmann::json training_identity(const data::BarSource& source, const TrainingSetup& setup) {
  const auto& s = source;
  const auto& in = s.read.inputs;
  nlohmann::json read{{"parquet", s.parquet_file},
                      {"csv", s.csv_file},
                      {"symbol", s.read.symbol},
                      {"columns",
                       {s.read.columns.timestamp, s.read.columns.open, s.read.columns.high, s.read.columns.low,
                        s.read.columns.close, s.read.columns.volume, s.read.columns.symbol}},
                      {"observed", in.observed},
                      {"known", in.known},
                      {"static", in.statics},
                      {"observed_categorical", in.observed_categorical},
                      {"known_categorical", in.known_categorical},
                      {"static_categorical", in.static_categorical},
                      {"missing", static_cast<int>(in.missing)},
                      {"calendar_timezone", in.calendar_timezone},
                      {"target",
                       {in.target.column, data::target_transform_name(in.target.transform),
                        data::normalization_name(in.target.normalize)}}};
  if (s.uses_embedded_data()) {
    const auto& e = s.synthetic;
    read["embedded"] = {{"rows", e.rows},
                        {"symbols", e.symbols},
                        {"seed", e.seed},
                        {"bar_minutes", e.bar_minutes},
                        {"shift_after_bar", e.shift_after_bar}};
  }
  // The architecture as a fresh model gets it, from one probe.
  const auto& d = setup.dataset;
  model::TftOptions probe(1, 1, 1, d.encoder_length, d.horizon);
  setup.architecture.apply_to(probe);
  auto training = to_json(setup.train);
  training.erase("checkpoint_policy");  // memory and time only, never the numbers
  training.erase("memory_budget_bytes");
  training.erase("eval_batch_size");
  const auto& q = setup.qat;
  return {{"source", read},
          {"windows", data::to_json(d)},
          {"model", model::to_json(probe)},
          {"training", training},
          {"qat",
           {{"use_qat", q.use_qat},
            {"weight_bits", q.weight_bits},
            {"activation_bits", q.activation_bits},
            {"calibration_batches", q.calibration_batches},
            {"freeze_observers", q.freeze_observers},
            {"two_phase", q.two_phase},
            {"qat_epochs", q.qat_epochs},
            {"live_epochs", q.live_epochs}}}};
}

}  // namespace qtft::train
