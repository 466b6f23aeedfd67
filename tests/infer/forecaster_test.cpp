// The serving API's promises: forecasts past the last bar that agree bit for bit with the
// backtest path, future timestamps continued at the bar interval, safe concurrent calls,
// and clear errors for bars a forecast cannot use.
#include <ATen/CPUGeneratorImpl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "memory/bitwise.h"
#include "qtft/artifact/model_file.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/data/features/dataset.h"
#include "qtft/infer/forecast.h"
#include "qtft/infer/forecaster.h"
#include "qtft/model/model_building.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"
#include "support/tiny_model.h"

namespace qtft::infer {
namespace {

using ::testing::HasSubstr;

const c10::Device kCpu(c10::kCPU);

// A tiny trained-looking model (random weights are enough: the promises are about the
// path, not the skill) saved next to the bars and dataset it was built on.
struct Saved {
  std::unique_ptr<test::TempDir> dir;
  data::BarSet bars;
  data::Dataset dataset;
  std::string path;
};

// `scheduled`: the bars carry a declared known column 'k', a schedule of events.
Saved save_tiny_model(int symbols = 2, bool qat = false, bool scheduled = false) {
  Saved s{std::make_unique<test::TempDir>(), test::regular_bar_set(301, symbols), data::Dataset{}, ""};
  if (scheduled) {
    s.bars.declared.known = {"k"};
    for (auto& series : s.bars.series) {
      auto& k = series.declared_known.emplace_back();
      for (size_t i = 0; i < series.size(); ++i) k.push_back(i % 7 == 3 ? 1.0 : 0.0);
    }
  }
  data::DatasetOptions o;
  o.encoder_length = 12;
  o.horizon = 3;
  s.dataset = data::Dataset::build(s.bars, o);
  auto options = test::tiny_model_options(s.dataset);
  options.use_qat(qat);
  auto model = model::build_model(options, 5);
  s.path = s.dir->file("model.safetensors");
  artifact::save_model_file(
      s.path, {options, s.dataset.schema(), s.dataset.options(), artifact::named_weights(*model), std::nullopt});
  return s;
}

// Bars [0, end) of one series.
data::BarSeries first_bars(const data::BarSeries& s, size_t end) { return data::slice_bars(s, 0, end); }

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(Forecaster, MatchesTheBacktestForTheWindowEndingAtT) {
  auto saved = save_tiny_model();
  auto forecaster = Forecaster::load(saved.path);
  auto loaded = artifact::load_model(saved.path, kCpu);
  // The backtest path, one window per forward like the single forecast below.
  auto table = forecast_split(loaded.model, saved.dataset, data::Split::Test, 1, kCpu);
  const int64_t l = saved.dataset.options().encoder_length, h = saved.dataset.options().horizon;
  const size_t windows = saved.dataset.num_windows(data::Split::Test);
  ASSERT_GT(windows, 10u);
  for (size_t index : {size_t{0}, windows / 2, windows - 1}) {
    SCOPED_TRACE("test window " + std::to_string(index));
    const auto w = saved.dataset.window(data::Split::Test, index);
    const auto& series = saved.bars.series[w.series];
    // Feature row r describes bar r + 1: the window's last encoder row is bar `origin`.
    const auto origin = static_cast<size_t>(w.start + l - 1 + 1);
    std::vector<int64_t> future(series.timestamp_ns.begin() + static_cast<std::ptrdiff_t>(origin + 1),
                                series.timestamp_ns.begin() + static_cast<std::ptrdiff_t>(origin + 1 + h));
    auto f = forecaster.forecast(first_bars(series, origin + 1), future);
    EXPECT_EQ(f.symbol, series.symbol);
    EXPECT_EQ(f.origin_ns, series.timestamp_ns[origin]);
    EXPECT_FALSE(f.timestamps_continued);
    ASSERT_EQ(f.steps.size(), static_cast<size_t>(h));
    for (int64_t step = 0; step < h; ++step) {
      const auto row = static_cast<size_t>(static_cast<int64_t>(index) * h + step);
      ASSERT_EQ(table.step[row], step + 1);
      EXPECT_EQ(f.steps[step].timestamp_ns, table.timestamp_ns[row]);
      for (size_t q = 0; q < f.quantiles.size(); ++q) {
        EXPECT_TRUE(same_bits(f.steps[step].quantile_return[q], table.quantile_return[q][row]))
            << "step " << step + 1 << " quantile " << q << ": " << f.steps[step].quantile_return[q] << " vs "
            << table.quantile_return[q][row];
        EXPECT_TRUE(same_bits(f.steps[step].quantile_price[q], table.quantile_price[q][row]));
      }
    }
  }
}

// Levels the model was not trained on: one line per input, naming each level; none, nothing.
TEST(Forecaster, NamesTheLevelsItForecastFromTheUnknownEntry) {
  Forecast forecast;
  forecast.symbol = "ES";
  EXPECT_EQ(format_unknown_levels(forecast), "");
  forecast.unknown_levels = {{"sector", "energy"}, {"venue", "C"}, {"venue", "D"}};
  EXPECT_EQ(format_unknown_levels(forecast),
            "symbol 'ES': input 'sector' has levels the model was not trained on ('energy'): forecast from the "
            "input's unknown entry\n"
            "symbol 'ES': input 'venue' has levels the model was not trained on ('C', 'D'): forecast from the input's "
            "unknown entry\n");
}

TEST(Forecaster, ContinuesTheSeriesAtItsMedianBarSpacing) {
  auto saved = save_tiny_model();
  auto forecaster = Forecaster::load(saved.path);
  const auto& series = saved.bars.series[0];
  auto recent = first_bars(series, 100);
  // A halt among the recent bars does not move the median spacing.
  for (size_t i = 60; i < recent.size(); ++i) recent.timestamp_ns[i] += 3'600'000'000'000LL;
  auto f = forecaster.forecast(recent);
  EXPECT_TRUE(f.timestamps_continued);
  const int64_t five_minutes = 300'000'000'000LL;
  EXPECT_EQ(f.bar_interval_ns, five_minutes);
  for (size_t step = 0; step < f.steps.size(); ++step) {
    EXPECT_EQ(f.steps[step].timestamp_ns, recent.timestamp_ns.back() + static_cast<int64_t>(step + 1) * five_minutes);
  }
  // Given the same timestamps explicitly, the forecast is the same.
  std::vector<int64_t> future;
  for (const auto& s : f.steps) future.push_back(s.timestamp_ns);
  auto given = forecaster.forecast(recent, future);
  for (size_t step = 0; step < f.steps.size(); ++step) {
    for (size_t q = 0; q < f.quantiles.size(); ++q) {
      EXPECT_TRUE(same_bits(given.steps[step].quantile_return[q], f.steps[step].quantile_return[q]));
    }
  }
  // Prices follow the median path: step 1's median price is the last close times exp(median return).
  const size_t median = 1;
  EXPECT_DOUBLE_EQ(f.steps[0].quantile_price[median],
                   recent.close.back() * std::exp(f.steps[0].quantile_return[median]));
}

TEST(Forecaster, ReadsOnlyTheBarsItNeeds) {
  auto saved = save_tiny_model();
  auto forecaster = Forecaster::load(saved.path);
  EXPECT_EQ(forecaster.min_bars(), 13);
  const auto& series = saved.bars.series[1];
  auto longer = forecaster.forecast(first_bars(series, 200));
  auto shortest = data::slice_bars(series, 200 - 13, 200);
  auto exact = forecaster.forecast(shortest);
  for (size_t step = 0; step < exact.steps.size(); ++step) {
    EXPECT_EQ(exact.steps[step].quantile_price, longer.steps[step].quantile_price);
  }
}

TEST(Forecaster, ABatchForecastsEverySeriesInOneCall) {
  auto saved = save_tiny_model();
  auto forecaster = Forecaster::load(saved.path);
  std::vector<data::BarSeries> recent{first_bars(saved.bars.series[0], 150), first_bars(saved.bars.series[1], 90)};
  auto batch = forecaster.forecast(recent);
  ASSERT_EQ(batch.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    auto single = forecaster.forecast(recent[i]);
    EXPECT_EQ(batch[i].symbol, recent[i].symbol);
    for (size_t step = 0; step < single.steps.size(); ++step) {
      for (size_t q = 0; q < single.quantiles.size(); ++q) {
        // One forward of two windows may sum in another order than two of one.
        EXPECT_NEAR(batch[i].steps[step].quantile_return[q], single.steps[step].quantile_return[q], 1e-6);
      }
    }
  }
}

TEST(Forecaster, ConcurrentCallsGiveTheSerialBits) {
  auto saved = save_tiny_model(2, /*qat=*/true);
  auto forecaster = Forecaster::load(saved.path);
  EXPECT_EQ(forecaster.kind(), ModelKind::Qat);
  EXPECT_STREQ(model_kind_name(forecaster.kind()), "qat");
  std::vector<data::BarSeries> inputs;
  for (size_t end : {40, 120, 200, 301}) inputs.push_back(first_bars(saved.bars.series[end % 2], end));
  std::vector<Forecast> serial;
  for (const auto& in : inputs) serial.push_back(forecaster.forecast(in));
  constexpr int kThreads = 4, kRounds = 10;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < kRounds; ++round) {
        const size_t i = static_cast<size_t>(t + round) % inputs.size();
        auto f = forecaster.forecast(inputs[i]);
        for (size_t step = 0; step < f.steps.size(); ++step) {
          for (size_t q = 0; q < f.quantiles.size(); ++q) {
            if (!same_bits(f.steps[step].quantile_return[q], serial[i].steps[step].quantile_return[q])) ++mismatches[t];
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(Forecaster, AOneSeriesModelForecastsThatSeriesUnderAnyName) {
  auto saved = save_tiny_model(1);
  auto forecaster = Forecaster::load(saved.path);
  auto recent = first_bars(saved.bars.series[0], 50);
  recent.symbol = "recent";
  auto f = forecaster.forecast(recent);
  EXPECT_EQ(f.symbol, saved.bars.series[0].symbol);  // the model's name for it
}

TEST(Forecaster, RefusesBarsItCannotUseWithClearErrors) {
  auto saved = save_tiny_model();
  auto forecaster = Forecaster::load(saved.path);
  const auto& series = saved.bars.series[0];
  auto message = [&](const data::BarSeries& bars, std::vector<int64_t> future = {}) {
    return test::error_message([&] { forecaster.forecast(bars, future); });
  };
  EXPECT_THAT(message(first_bars(series, 12)), HasSubstr("12 bars given, the model needs at least 13"));
  auto bad_price = first_bars(series, 50);
  bad_price.close[45] = std::nan("");
  EXPECT_THAT(message(bad_price), HasSubstr("bar 46"));
  EXPECT_THAT(message(bad_price), HasSubstr("close nan is not finite"));
  auto unsorted = first_bars(series, 50);
  std::swap(unsorted.timestamp_ns[10], unsorted.timestamp_ns[11]);
  EXPECT_THAT(message(unsorted), HasSubstr("unsorted timestamp"));
  auto unknown = first_bars(series, 50);
  unknown.symbol = "ZZ";
  EXPECT_THAT(message(unknown), HasSubstr("symbol 'ZZ' was not in the training data (known: S0, S1)"));
  auto no_volume = first_bars(series, 50);
  no_volume.volume.clear();
  EXPECT_THAT(message(no_volume), HasSubstr("the model reads volume"));
  auto recent = first_bars(series, 50);
  EXPECT_THAT(message(recent, {recent.timestamp_ns.back() + 1}),
              HasSubstr("1 future timestamps given, the model forecasts 3"));
  EXPECT_THAT(
      message(recent, {recent.timestamp_ns.back(), recent.timestamp_ns.back() + 2, recent.timestamp_ns.back() + 3}),
      HasSubstr("is not after"));
}

// The bars up to `origin` with the next `ahead` bars as future rows, their known values
// those of the series.
data::BarSeries with_future_rows(const data::BarSeries& series, size_t origin, size_t ahead) {
  auto recent = first_bars(series, origin + 1);
  const auto from = static_cast<std::ptrdiff_t>(origin + 1), to = static_cast<std::ptrdiff_t>(origin + 1 + ahead);
  recent.future_timestamp_ns.assign(series.timestamp_ns.begin() + from, series.timestamp_ns.begin() + to);
  for (const auto& k : series.declared_known) recent.future_known.emplace_back(k.begin() + from, k.begin() + to);
  return recent;
}

TEST(Forecaster, ReadsTheDeclaredKnownInputsAheadFromTheFutureRows) {
  auto saved = save_tiny_model(2, false, /*scheduled=*/true);
  auto forecaster = Forecaster::load(saved.path);
  EXPECT_THAT(forecaster.inputs().known, ::testing::ElementsAre("k"));
  auto loaded = artifact::load_model(saved.path, kCpu);
  auto table = forecast_split(loaded.model, saved.dataset, data::Split::Test, 1, kCpu);
  const int64_t l = saved.dataset.options().encoder_length, h = saved.dataset.options().horizon;
  const size_t windows = saved.dataset.num_windows(data::Split::Test);
  for (size_t index : {size_t{0}, windows - 1}) {
    SCOPED_TRACE("test window " + std::to_string(index));
    const auto w = saved.dataset.window(data::Split::Test, index);
    const auto& series = saved.bars.series[w.series];
    const auto origin = static_cast<size_t>(w.start + l);
    // A schedule further ahead than the horizon, where the series has the bars: the first
    // horizon() rows are read.
    const size_t ahead = std::min(static_cast<size_t>(h) + 2, series.size() - origin - 1);
    const auto f = forecaster.forecast(with_future_rows(series, origin, ahead));
    EXPECT_FALSE(f.timestamps_continued);
    for (int64_t step = 0; step < h; ++step) {
      const auto row = static_cast<size_t>(static_cast<int64_t>(index) * h + step);
      EXPECT_EQ(f.steps[step].timestamp_ns, table.timestamp_ns[row]);
      for (size_t q = 0; q < f.quantiles.size(); ++q) {
        EXPECT_TRUE(same_bits(f.steps[step].quantile_return[q], table.quantile_return[q][row])) << step << " " << q;
      }
    }
  }
  // The values ahead are read: another schedule, another forecast.
  const auto& series = saved.bars.series[0];
  auto recent = with_future_rows(series, 200, 3);
  const auto as_scheduled = forecaster.forecast(recent);
  for (auto& v : recent.future_known[0]) v = 1.0 - v;
  EXPECT_NE(forecaster.forecast(recent).steps[0].quantile_return, as_scheduled.steps[0].quantile_return);
}

TEST(Forecaster, ADeclaredKnownInputWithoutItsFutureValuesIsRefused) {
  auto saved = save_tiny_model(2, false, /*scheduled=*/true);
  auto forecaster = Forecaster::load(saved.path);
  const auto& series = saved.bars.series[1];
  auto message = [&](const data::BarSeries& bars, std::vector<int64_t> future = {}) {
    return test::error_message([&] { forecaster.forecast(bars, future); });
  };
  EXPECT_THAT(message(first_bars(series, 100)),
              HasSubstr("forecast of 'S1': the model reads the declared known column 'k' at the 3 bars ahead: give "
                        "them as rows after the last bar"));
  EXPECT_THAT(message(with_future_rows(series, 99, 2)),
              HasSubstr("2 future rows given, the model forecasts 3 bars and reads the declared known column 'k' "
                        "at each"));
  auto twice = with_future_rows(series, 99, 3);
  EXPECT_THAT(message(twice, twice.future_timestamp_ns), HasSubstr("the bars ahead are given twice"));
  auto unscheduled = with_future_rows(series, 99, 3);
  unscheduled.future_known.clear();
  EXPECT_THAT(message(unscheduled), HasSubstr("its future rows carry 0 declared known columns, its bars 1"));
}

TEST(TargetUnits, EachTransformConvertsBackToTheColumnsUnits) {
  const double scaled[] = {1.0, -1.0};  // two steps of one quantile
  double values[2], levels[2];
  to_original_units(scaled, 2, 1, 0, {data::TargetTransform::None, 5.0, 2.0}, 100.0, values, levels);
  EXPECT_EQ(values[0], 7.0);
  EXPECT_EQ(values[1], 3.0);
  EXPECT_EQ(levels[1], 3.0);
  to_original_units(scaled, 2, 1, 0, {data::TargetTransform::Log, 5.0, 2.0}, 100.0, values, levels);
  EXPECT_EQ(levels[0], std::exp(7.0));
  to_original_units(scaled, 2, 1, 0, {data::TargetTransform::Log1p, 5.0, 2.0}, 100.0, values, levels);
  EXPECT_EQ(levels[1], std::expm1(3.0));
  // A log return compounds from the last value along the median path.
  to_original_units(scaled, 2, 1, 0, {data::TargetTransform::LogReturn, 0.0, 0.5}, 100.0, values, levels);
  EXPECT_EQ(values[0], 0.5);
  EXPECT_EQ(levels[1], 100.0 * std::exp(0.5 + -0.5));
}

TEST(Forecaster, RefusesAFileThatIsNotAModel) {
  test::TempDir dir;
  auto path = dir.write("notes.safetensors", "this is not a model");
  EXPECT_THAT(test::error_message([&] { Forecaster::load(path); }), HasSubstr("notes.safetensors"));
  EXPECT_THROW(Forecaster::load(dir.file("missing.safetensors")), Error);
}

TEST(Forecaster, LoadingAndForecastingLeaveTheRandomStreamAlone) {
  auto saved = save_tiny_model();
  torch::manual_seed(77);
  const auto before = at::detail::getDefaultCPUGenerator().get_state();
  auto forecaster = Forecaster::load(saved.path);
  forecaster.forecast(first_bars(saved.bars.series[0], 60));
  EXPECT_TRUE(test::bitwise_equal(at::detail::getDefaultCPUGenerator().get_state(), before));
}

}  // namespace
}  // namespace qtft::infer
