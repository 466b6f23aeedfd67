// Declared inputs from the command line: make-data's extra columns, train --observed/--known
// (the summary names the columns left unused), and every command that loads the model
// reading the same columns; mistakes exit 1 with one line naming the column.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "qtft/artifact/model_file.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/bars.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kModel = " --hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4";
const std::string kShort = " --epochs 1 --max-batches-per-epoch 2 --batch-size 16";

class DeclaredInputsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("bars.parquet");
    const auto made = run_qtft(dir_, "make-data --output " + data_ + " --rows 2400 --symbols 2 --extra-inputs 6");
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  test::TempDir dir_;
  std::string data_;
};

TEST_F(DeclaredInputsCli, TrainedModelsReadTheirColumnsEverywhere) {
  const auto model = dir_.file("m.safetensors");
  auto run = run_qtft(dir_, "train --parquet-file " + data_ + " --observed lead_signal,'f0[01]' --known event_flag" +
                                kModel + kShort + " --save-model " + model);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("observed [log_return, hl_range, close_open, log_volume, bar_gap, lead_signal, f00, "
                                 "f01], known [time_of_day_sin, time_of_day_cos, day_of_week_sin, day_of_week_cos, "
                                 "event_flag]"));
  EXPECT_THAT(run.out, HasSubstr("input counts: 8 observed (3 declared), 5 known (1 declared), 1 static"));
  EXPECT_THAT(run.out, HasSubstr("not used: 2 columns: f02, vol_class"));

  // The model file's spec records them; evaluate and explain read them without being told.
  const auto file = artifact::load_model_file(model);
  EXPECT_EQ(file.options.num_observed(), 8);
  EXPECT_EQ(file.options.num_known(), 5);
  run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ + " --split validation");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  run = run_qtft(dir_, "explain --load-model " + model + " --parquet-file " + data_ + " --json " + dir_.file("x.json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("lead_signal"));
  EXPECT_THAT(run.out, HasSubstr("event_flag"));

  // A file without one of the model's columns is refused, naming it.
  const auto plain = dir_.file("plain.parquet");
  ASSERT_EQ(run_qtft(dir_, "make-data --output " + plain + " --rows 2400 --symbols 2").exit_code, 0);
  run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + plain);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(plain + ": the model's observed column 'lead_signal' is not in the file"));
}

TEST_F(DeclaredInputsCli, MistakesExitOneNamingTheColumnAndWriteNothing) {
  const auto model = dir_.file("never.safetensors");
  auto expect_refused = [&](const std::string& flags, const std::string& message) {
    const auto run =
        run_qtft(dir_, "train --parquet-file " + data_ + flags + kModel + kShort + " --save-model " + model);
    EXPECT_EQ(run.exit_code, 1) << flags << "\n" << run.err;
    EXPECT_THAT(run.err, HasSubstr(message)) << flags;
    EXPECT_FALSE(std::filesystem::exists(model)) << flags;
  };
  expect_refused(" --observed nope", "--observed column 'nope' is not in the file (columns: timestamp, symbol,");
  expect_refused(" --observed 'g_*'", "--observed pattern 'g_*' matches no column");
  expect_refused(" --observed 'f*' --known f01",
                 "column 'f01' is declared twice: by --observed 'f*' and by --known 'f01'");
  expect_refused(" --observed symbol", "--observed column 'symbol' is the file's timestamp or symbol column");
  // The embedded data has no columns to declare: a usage error.
  const auto run = run_qtft(dir_, "train --observed lead_signal" + kModel + kShort);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("make-data --extra-inputs"));
}

TEST_F(DeclaredInputsCli, ForecastReadsTheKnownInputsAheadFromFutureRows) {
  const auto model = dir_.file("known.safetensors");
  auto run = run_qtft(
      dir_, "train --parquet-file " + data_ + " --known event_flag" + kModel + kShort + " --save-model " + model);
  ASSERT_EQ(run.exit_code, 0) << run.err;

  // The recent bars as CSV, then four rows ahead of S0 with only the timestamp, the symbol
  // and the scheduled flag.
  data::BarReadOptions read;
  read.inputs.known = {"event_flag"};
  auto bars = data::read_bars_parquet(data_, read);
  const auto recent = dir_.file("recent.csv");
  data::write_bars_csv(bars, recent);
  const auto& s0 = bars.series[0];
  const int64_t step = s0.timestamp_ns.back() - s0.timestamp_ns[s0.size() - 2];
  std::string ahead;
  for (int i = 1; i <= 4; ++i) {
    ahead += format_utc(s0.timestamp_ns.back() + i * step) + "," + s0.symbol + ",,,,,," + (i == 2 ? "1" : "0") + "\n";
  }
  { std::ofstream(recent, std::ios::app) << ahead; }
  // S1 has no rows ahead: refused, naming the column and the bars needed.
  run = run_qtft(dir_, "forecast --load-model " + model + " --csv-file " + recent);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("forecast of '" + bars.series[1].symbol +
                                 "': the model reads the declared known column 'event_flag' at the 4 bars ahead"));
  // With S1 alone left out, S0 is forecast at the rows' times.
  const auto only_s0 = dir_.file("s0.csv");
  bars.series.resize(1);
  data::write_bars_csv(bars, only_s0);
  { std::ofstream(only_s0, std::ios::app) << ahead; }
  run = run_qtft(dir_, "forecast --load-model " + model + " --csv-file " + only_s0 + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto forecasts = nlohmann::json::parse(run.out);
  ASSERT_EQ(forecasts.size(), 1u);
  EXPECT_EQ(forecasts[0]["steps"][3]["timestamp"], format_utc(s0.timestamp_ns.back() + 4 * step));
  EXPECT_EQ(forecasts[0]["timestamps_continued"], false);
}

TEST_F(DeclaredInputsCli, AnyColumnIsATargetAndForecastsComeBackInItsUnits) {
  const auto model = dir_.file("f00.safetensors");
  auto run = run_qtft(dir_, "train --parquet-file " + data_ +
                                " --target-column f00 --target-transform none --normalize per-series" + kModel +
                                kShort + " --save-model " + model);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("target: next 4 values of 'f00' (centered and scaled per series"));
  EXPECT_THAT(run.out, HasSubstr("bar_gap, target]"));
  const auto file = artifact::load_model_file(model);
  EXPECT_EQ(file.features.target().column, "f00");
  EXPECT_EQ(file.features.series_stats.size(), 2u);
  // Every command that loads the model reads its target without being told.
  const auto metrics = dir_.file("f00.json");
  run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + data_ +
                           " --split validation --metrics-json " + metrics);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // The metrics in f00's own units too, each series' windows by that series' scale.
  EXPECT_THAT(run.out, HasSubstr("in the target's units (before scaling; per series"));
  const auto evaluated = nlohmann::json::parse(test::read_text(metrics));
  EXPECT_GT(evaluated.at("model").at("in_target_units").at("loss").get<double>(), 0.0);
  EXPECT_GT(evaluated.at("baselines").at("zero").at("in_target_units").at("mae").get<double>(), 0.0);
  run = run_qtft(dir_, "forecast --load-model " + model + " --parquet-file " + data_ + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // A value as it is: the price column holds the forecast value itself.
  const auto forecasts = nlohmann::json::parse(run.out);
  ASSERT_EQ(forecasts.size(), 2u);

  // Mistakes: exit 1 naming the column and row, or 2 for a transform that does not exist.
  run =
      run_qtft(dir_, "train --parquet-file " + data_ + " --target-column f00 --target-transform log" + kModel + kShort);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("column 'f00', row"));
  EXPECT_THAT(run.err, HasSubstr("is not positive: --target-transform log takes its log"));
  run = run_qtft(dir_, "train --parquet-file " + data_ + " --target-column nope" + kModel + kShort);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("--target-column 'nope' is not in the file"));
  run = run_qtft(dir_, "train --parquet-file " + data_ + " --target-transform sqrt" + kModel + kShort);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--target-transform must be log-return, none, log or log1p, got 'sqrt'"));
}

// The declaration reaches the workers of --nproc and every model of --compare-accuracy.
TEST_F(DeclaredInputsCli, NprocAndCompareAccuracyTrainOnTheDeclaredInputs) {
  const std::string declared = " --observed lead_signal --known event_flag";
  const auto model = dir_.file("ranks.safetensors");
  auto run = run_qtft(
      dir_, "train --parquet-file " + data_ + declared + " --nproc 2" + kModel + kShort + " --save-model " + model);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Data parallel: 2 ranks"));
  const auto file = artifact::load_model_file(model);
  EXPECT_EQ(file.options.num_observed(), 6);
  EXPECT_EQ(file.options.num_known(), 5);
  EXPECT_EQ(file.features.observed.back().name, "lead_signal");
  EXPECT_EQ(file.features.known.back().name, "event_flag");

  const auto json = dir_.file("compare.json");
  run = run_qtft(dir_, "train --parquet-file " + data_ + declared +
                           " --compare-accuracy --epochs 2 --max-batches-per-epoch 2 --batch-size 16 "
                           "--qat-calibration-batches 2 --metrics-json " +
                           json + kModel);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto compared = nlohmann::json::parse(test::read_text(json));
  EXPECT_EQ(compared.at("config").at("model").at("num_observed").get<int64_t>(), 6);
  EXPECT_EQ(compared.at("config").at("model").at("num_known").get<int64_t>(), 5);
  EXPECT_TRUE(compared.at("models").contains("qat_live"));
}

TEST_F(DeclaredInputsCli, TheCalendarZoneGoesWithTheModel) {
  const auto model = dir_.file("chicago.safetensors");
  auto run = run_qtft(dir_, "train --parquet-file " + data_ + " --calendar-timezone America/Chicago" + kModel + kShort +
                                " --save-model " + model);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("calendar: time-of-day, day-of-week in America/Chicago"));
  EXPECT_EQ(artifact::load_model_file(model).features.calendar_timezone(), "America/Chicago");
  // The bars ahead get their calendar on the model's clock, without the flag.
  run = run_qtft(dir_, "forecast --load-model " + model + " --parquet-file " + data_);
  EXPECT_EQ(run.exit_code, 0) << run.err;

  run = run_qtft(dir_, "train --calendar-timezone Mars/Olympus_Mons" + kModel + kShort);
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("--calendar-timezone: 'Mars/Olympus_Mons' is not a zone of the tz database"));
}

// A static category (make-data's vol_class) through QAT training, explain's ranking, the
// int8 export and a forecast of the int8 model.
TEST_F(DeclaredInputsCli, AStaticCategoricalReachesEveryCommandAndTheInt8Model) {
  const auto model = dir_.file("static.safetensors"), int8 = dir_.file("static.int8.safetensors");
  // Four symbols, so that both classes occur: ES, NQ and CL trade high, GC low.
  const auto data = dir_.file("four.parquet");
  ASSERT_EQ(run_qtft(dir_, "make-data --output " + data + " --rows 3200 --symbols 4 --extra-inputs 3").exit_code, 0);
  auto run = run_qtft(dir_, "train --parquet-file " + data +
                                " --observed lead_signal --static-categorical vol_class --use-qat "
                                "--qat-calibration-batches 2" +
                                kModel + kShort + " --save-model " + model + " --metrics-json " + dir_.file("m.json"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("static [symbol, vol_class]"));
  EXPECT_THAT(run.out, HasSubstr("2 static (1 declared, 1 of them categorical)"));
  EXPECT_THAT(run.out, HasSubstr("not used: 1 column: event_flag"));
  EXPECT_THAT(run.out, HasSubstr("vol_class          categorical, 2 levels and an unknown entry"));
  const auto metrics = nlohmann::json::parse(test::read_text(dir_.file("m.json")));
  EXPECT_EQ(metrics.at("unknown_category_rows"), 0);
  const auto file = artifact::load_model_file(model);
  EXPECT_EQ(file.options.static_categories(), std::vector<int64_t>{3});
  EXPECT_EQ(file.features.statics.at(0).levels, (std::vector<std::string>{"high", "low"}));

  const auto json = dir_.file("x.json");
  run = run_qtft(dir_, "explain --top 1 --load-model " + model + " --parquet-file " + data + " --json " + json);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("and 1 more below (--top)"));
  const auto explained = nlohmann::json::parse(test::read_text(json));
  EXPECT_EQ(explained["ranking"]["static"].size(), 1u);
  EXPECT_EQ(explained["static_weights"].size(), 2u);
  const double top = explained["ranking"]["encoder"][0]["weight"].get<double>();
  for (const auto& [_, w] : explained["encoder_weights"].items()) EXPECT_LE(w.get<double>(), top);

  run = run_qtft(dir_, "export-int8 --load-model " + model + " --output " + int8);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  run = run_qtft(dir_, "forecast --load-model " + int8 + " --parquet-file " + data);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("integer products: "));
  // A file without the column is refused, naming it.
  const auto plain = dir_.file("plain.parquet");
  ASSERT_EQ(run_qtft(dir_, "make-data --output " + plain + " --rows 2400 --symbols 2 --extra-inputs 2").exit_code, 0);
  run = run_qtft(dir_, "evaluate --load-model " + model + " --parquet-file " + plain);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("the model's static categorical column 'vol_class' is not in the file"));
}

}  // namespace
}  // namespace qtft
