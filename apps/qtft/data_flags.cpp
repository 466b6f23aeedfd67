#include "data_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/local_time.h"

namespace qtft::cli {

void add_bar_source_flags(CLI::App& cmd, DataFlags& f) {
  auto& src = f.source;
  auto* parquet = cmd.add_option("--parquet-file,--data", src.parquet_file,
                                 "Bars in a Parquet file, or a folder of them (read recursively; Hive partitions such "
                                 "as symbol=ES/year=2024/ may supply the symbol)")
                      ->check(CLI::ExistingPath);
  auto* csv = cmd.add_option("--csv-file", src.csv_file, "Bars in a CSV file")->check(CLI::ExistingFile);
  parquet->excludes(csv);
  auto* store = cmd.add_option("--feature-store", src.feature_store,
                               "Folder for the prepared feature store (memory-mapped features, rebuilt when the files "
                               "or options change); default for a dataset folder: FOLDER/_qtft_store");
  cmd.add_flag("--no-feature-store", src.in_memory, "Compute every feature in memory, even for a dataset folder")
      ->excludes(store);
  auto& c = src.read.columns;
  cmd.add_option("--timestamp-column", c.timestamp, "Timestamp column")->capture_default_str();
  cmd.add_option("--open-column", c.open, "Open price column")->capture_default_str();
  cmd.add_option("--high-column", c.high, "High price column")->capture_default_str();
  cmd.add_option("--low-column", c.low, "Low price column")->capture_default_str();
  cmd.add_option("--close-column", c.close, "Close price column ('price' is tried when 'close' is absent)")
      ->capture_default_str();
  cmd.add_option("--volume-column", c.volume, "Volume column (optional in the data)")->capture_default_str();
  cmd.add_option("--symbol-column", c.symbol, "Symbol column (optional in the data)")->capture_default_str();
  cmd.add_option("--symbol", src.read.symbol,
                 "Name of the one series of a file without a symbol column (default: the file's name)");
  cmd.add_option("--timestamp-unit", f.timestamp_unit,
                 "Unit of integer timestamps: auto (>= 1e11 means milliseconds), s or ms")
      ->check(CLI::IsMember({"auto", "s", "ms"}))
      ->capture_default_str();
}

void add_input_flags(CLI::App& cmd, DataFlags& f) {
  auto& inputs = f.source.read.inputs;
  cmd.add_option("--observed", inputs.observed,
                 "Real columns known up to each bar, fed to the encoder besides the derived inputs: a comma list of "
                 "names or globs ('f_*'), repeatable")
      ->delimiter(',');
  cmd.add_option("--known", inputs.known,
                 "Real columns known in advance (schedules), fed to the encoder and the decoder: names or globs")
      ->delimiter(',');
  cmd.add_option("--static", inputs.statics,
                 "Real columns constant within each series (contract metadata: tick size, multiplier), fed to the "
                 "static covariate encoders: names or globs")
      ->delimiter(',');
  cmd.add_option("--observed-categorical", inputs.observed_categorical,
                 "Text, dictionary or integer columns known up to each bar, each level with an embedding of its own; "
                 "levels not seen in training map to an unknown entry")
      ->delimiter(',');
  cmd.add_option("--known-categorical", inputs.known_categorical,
                 "Categorical columns known in advance (session, release kind): names or globs")
      ->delimiter(',');
  cmd.add_option("--static-categorical", inputs.static_categorical,
                 "Categorical columns constant within each series (exchange, asset class): names or globs")
      ->delimiter(',');
  cmd.add_option("--missing", f.missing,
                 "A null in a declared column after its series' first complete row: error, or forward-fill (the "
                 "series' previous value); leading nulls (a warm-up) always drop their bars")
      ->check(CLI::IsMember({"error", "forward-fill"}))
      ->capture_default_str();
  cmd.add_option("--inputs", f.inputs_file,
                 "A declaration file for many inputs, JSON: {\"observed\": [\"f_*\"], \"known\": [...], \"static\": "
                 "[...], \"observed_categorical\": [...], \"known_categorical\": [...], \"static_categorical\": "
                 "[...]}, added to the flags' columns")
      ->check(CLI::ExistingFile);
  cmd.add_option("--calendar-timezone", inputs.calendar_timezone,
                 "The tz database zone whose clock the calendar inputs (time of day, day of week) read, e.g. "
                 "America/Chicago for CME, so that a session open keeps its time of day across daylight saving; "
                 "default UTC");
  cmd.add_option("--calendar", f.calendar,
                 "The calendar inputs, a comma list of time-of-day, day-of-week, day-of-month, month-of-year, or "
                 "none; default: those that vary at the bars' spacing (intraday: time of day and day of week; "
                 "daily: day of week, day of month, month of year; weekly: day of month, month of year; monthly: "
                 "month of year)");
  cmd.add_option("--target-column", inputs.target.column,
                 "The column to forecast (default: the close); its past is an observed input, 'target'");
  cmd.add_option("--target-transform", f.target_transform,
                 "What the model forecasts of the target column per bar: log-return (log of x / previous x), none "
                 "(x), log, or log1p; forecasts convert back to the column's units")
      ->capture_default_str();
  cmd.add_option("--normalize", f.normalize,
                 "Standardize the target and the real inputs on the training split over all series (pooled) or "
                 "each series by its own statistics (per-series)")
      ->capture_default_str();
}

void add_window_flags(CLI::App& cmd, DataFlags& f) {
  auto& d = f.dataset;
  cmd.add_option("--encoder-length", d.encoder_length, "Past bars the model sees")->capture_default_str();
  cmd.add_option("--horizon", d.horizon, "Future bars to forecast")->capture_default_str();
  cmd.add_option("--validation-fraction", d.validation_fraction, "Share of each symbol's rows for validation")
      ->capture_default_str();
  cmd.add_option("--test-fraction", d.test_fraction, "Share of each symbol's rows for test (the last ones)")
      ->capture_default_str();
}

void print_store(const data::StorePreparation& store) {
  std::fprintf(stderr, "Feature store: %s (%s; %lld bars, %lld series, %s", store.path.c_str(), store.reason.c_str(),
               static_cast<long long>(store.bars), static_cast<long long>(store.series),
               format_bytes(store.bytes).c_str());
  if (store.built) std::fprintf(stderr, ", %.1f s", store.seconds);
  std::fprintf(stderr, ")\n");
}

void finish_data_flags(DataFlags& f) {
  f.source.read.inputs.missing =
      f.missing == "forward-fill" ? data::MissingValues::ForwardFill : data::MissingValues::Error;
  f.source.read.inputs.target.transform = data::parse_target_transform(f.target_transform, "--target-transform");
  f.source.read.inputs.target.normalize = data::parse_normalization(f.normalize, "--normalize");
  if (!f.calendar.empty()) {
    f.source.read.inputs.calendar = data::parse_calendar(f.calendar, "--calendar");
    f.calendar.clear();  // once, however often the flags are finished
  }
  if (!f.inputs_file.empty()) {
    data::append_declaration(f.source.read.inputs, data::read_input_declaration(f.inputs_file));
    f.inputs_file.clear();  // once, however often the flags are finished
  }
  if (const auto& zone = f.source.read.inputs.calendar_timezone; !zone.empty() && !data::is_time_zone(zone)) {
    throw UsageError("--calendar-timezone: '" + zone +
                     "' is not a zone of the tz database (names such as America/Chicago, Europe/London, UTC)");
  }
  f.source.read.epoch_unit = f.timestamp_unit == "s"    ? data::EpochUnit::Seconds
                             : f.timestamp_unit == "ms" ? data::EpochUnit::Milliseconds
                                                        : data::EpochUnit::Auto;
}

}  // namespace qtft::cli
