#pragma once

// The serving API: a trained model and the latest bars of a series in, the quantiles of
// the next bars out. No LibTorch type appears here, so a trading system that embeds qtft
// compiles against plain C++ (it links LibTorch through the package all the same).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qtft/artifact/int8_kernels.h"
#include "qtft/common/device_choice.h"
#include "qtft/common/precision.h"
#include "qtft/data/bars/bars.h"
#include "qtft/data/features/unknown_level.h"

namespace qtft::infer {

struct ForecasterOptions {
  DeviceChoice device = DeviceChoice::Cpu;
  // For int8 files: integer products wherever they are exact, or dequantized float
  // products, bitwise the QAT model's; other files ignore it.
  artifact::Int8Kernels int8_kernels = artifact::Int8Kernels::integer;
  // Bf16: an FP32 or QAT file's products in bf16 (artifact::use_precision says where not).
  Precision precision = Precision::Fp32;
  // "split" or "adaptive": issue the quantiles with the file's conformal offsets of that
  // method (qtft.conformal: split, fitted on the validation split, or the adaptive ones a
  // backtest's walk left per symbol), crossing ones sorted. A file without them, or with the
  // other method's, is refused. Empty: the model's quantiles as they are.
  std::string conformal;
};

// What a model file holds: FP32 weights; fake-quantized weights and activations, as QAT
// trained them; or an int8 export of a QAT model.
enum class ModelKind { Fp32, Qat, Int8 };
const char* model_kind_name(ModelKind kind);  // "fp32", "qat", "int8"

// The forecast of one bar after the last given one.
struct ForecastStep {
  int64_t timestamp_ns = 0;  // when the bar is expected (given, a future row's, or continued at the interval)
  // One value per quantile level: the bar's one-bar log return, and the close it implies:
  //   last close * exp(sum of the median returns of the steps before + this return),
  // i.e. the median path up to the previous bar, then the quantile for this one.
  std::vector<double> quantile_return;
  std::vector<double> quantile_price;
};

struct Forecast {
  std::string symbol;             // the model's name for the series
  int64_t origin_ns = 0;          // the last given bar's time
  double origin_close = 0.0;      // and its close
  std::vector<double> quantiles;  // the levels, e.g. 0.1, 0.5, 0.9
  std::string conformal;          // "split" or "adaptive": the offsets the quantiles carry; "" for none
  // True when the caller gave no future timestamps and they continue the series at
  // bar_interval_ns, the median spacing of the bars the forecast read.
  bool timestamps_continued = false;
  int64_t bar_interval_ns = 0;
  std::vector<ForecastStep> steps;  // horizon() of them
  // Categorical levels in the bars read, then in the rows ahead (a known column's), that the
  // model's vocabulary lacks, each once in input order: the forecast took their unknown
  // entry (format_unknown_levels says so).
  std::vector<data::UnknownLevel> unknown_levels;
};

// One line per series and input with levels the model was not trained on, naming them;
// empty when there are none.
std::string format_unknown_levels(const Forecast& forecast);

// A model file opened for forecasting (FP32 or QAT; fake-quantized models forecast as they
// were evaluated). Forecasts read the same validation and feature code as training, so
// serving cannot drift from it: forecasting from the bars up to time t gives exactly what
// `qtft predict` gives for the window that ends at t.
//
// Thread safety: the const calls may run from several threads at once on one Forecaster
// (inference mode, nothing shared is written). Copies share the loaded model.
class Forecaster {
 public:
  // Throws qtft::Error naming the file when it is not a valid qtft model.
  static Forecaster load(const std::filesystem::path& path, const ForecasterOptions& options = {});

  // The next horizon() bars after the last of `recent`, the latest bars of one series in
  // time order (at least min_bars(); only the last min_bars() are read). The bars ahead are
  // `recent`'s future rows when it has them (future_timestamp_ns and future_known, at least
  // horizon() of them; the first horizon() are read), else `future_timestamps_ns` when given
  // (horizon() increasing times after the last bar), else continued at the median bar
  // spacing. A model with declared known inputs needs the future rows, since their values
  // ahead are data. `recent` is validated like a file (finite positive prices, increasing
  // timestamps, ...) and its symbol must be one the model knows, unless the model has only
  // one. Throws qtft::Error naming the series, bar, column and value at fault.
  Forecast forecast(const data::BarSeries& recent, std::span<const int64_t> future_timestamps_ns = {}) const;
  // Many series in one forward pass; future_timestamps_ns is empty or one entry per series
  // (an empty entry: continue at the interval).
  std::vector<Forecast> forecast(std::span<const data::BarSeries> recent,
                                 std::span<const std::vector<int64_t>> future_timestamps_ns = {}) const;

  // The tensors forecast(recent, future_timestamps_ns) runs the model on, as .npy files in
  // `folder` (which must exist) named as the model's inputs (model/model_inputs.h: the ONNX
  // export's graph inputs), each written atomically: for a serving system to check its own
  // featurization against qtft's. Returns the files written, in the inputs' order.
  std::vector<std::filesystem::path> save_inputs(std::span<const data::BarSeries> recent,
                                                 const std::filesystem::path& folder,
                                                 std::span<const std::vector<int64_t>> future_timestamps_ns = {}) const;
  int64_t encoder_length() const;
  int64_t horizon() const;
  // Bars a forecast needs: the encoder length, plus one because returns and gaps need the
  // bar before.
  int64_t min_bars() const;
  const std::vector<double>& quantiles() const;
  const std::vector<std::string>& symbols() const;
  // The declared columns the model reads besides the bars (BarSeries::declared_observed and
  // declared_known, in this order): the declaration to read recent bars with.
  data::InputDeclaration inputs() const;
  ModelKind kind() const;
  std::string source() const;  // the file it was loaded from
  // For an int8 file, how its products run (artifact::describe_int8_kernels); else empty.
  std::string int8_kernels() const;

 private:
  struct State;          // the model and its file, shared by copies
  struct PreparedBatch;  // the series' features and the batch the model takes
  PreparedBatch prepare_batch(std::span<const data::BarSeries> recent,
                              std::span<const std::vector<int64_t>> future_timestamps_ns) const;
  explicit Forecaster(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

}  // namespace qtft::infer
