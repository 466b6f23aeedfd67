// Declared static and categorical inputs: statics are one value per series and must stay
// constant within it; categoricals get a vocabulary from the training split, their feature
// is the level's index + 1, and a level the training split lacks is the unknown entry 0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "qtft/common/format.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/features/dataset_summary.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/store/feature_store.h"
#include "support/temp_dir.h"

namespace qtft::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kBars = 40;

// ES and NQ, 40 bars each. venue (text, observed): A and B alternating, and C on ES's last
// five bars (after its training rows); session (integer, known): bar % 3; sector (text,
// static): equity and tech; tick (real, static): 0.25 and 0.5. `tick_at` changes NQ's
// tick at that bar.
std::string categorical_csv(int tick_at = -1) {
  std::ostringstream out;
  out << "timestamp,symbol,close,venue,session,sector,tick\n";
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < kBars; ++i) {
      const int64_t ns = (1704184200LL + 300LL * i) * 1'000'000'000;
      const std::string venue = s == 0 && i >= 35 ? "C" : i % 2 ? "B" : "A";
      const std::string tick = s == 0 ? "0.25" : i == tick_at ? "0.75" : "0.5";
      out << format_utc(ns) << "," << (s ? "NQ" : "ES") << "," << 100 + i + s << "," << venue << "," << i % 3 << ","
          << (s ? "tech" : "equity") << "," << tick << "\n";
    }
  }
  return out.str();
}

BarReadOptions declaring_all() {
  BarReadOptions o;
  o.inputs.observed_categorical = {"venue"};
  o.inputs.known_categorical = {"session"};
  o.inputs.static_categorical = {"sector"};
  o.inputs.statics = {"tick"};
  return o;
}

DatasetOptions small_windows() {
  DatasetOptions o;
  o.encoder_length = 4;
  o.horizon = 2;
  return o;
}

TEST(CategoricalInputs, ReadAsLevelIndicesSharedByEverySeriesOfTheFile) {
  test::TempDir dir;
  const auto bars = read_bars_csv(dir.write("c.csv", categorical_csv()), declaring_all());
  EXPECT_THAT(bars.declared.observed_categorical, ElementsAre("venue"));
  EXPECT_THAT(bars.declared.static_columns(), ElementsAre("tick", "sector"));
  ASSERT_EQ(bars.series.size(), 2u);
  const auto& nq = bars.series[1];
  // The levels in order of first appearance in the file; the integer column's as text.
  EXPECT_THAT(nq.observed_levels.at(0), ElementsAre("A", "B", "C"));
  EXPECT_THAT(nq.known_levels.at(0), ElementsAre("0", "1", "2"));
  EXPECT_THAT(nq.static_levels, ElementsAre(ElementsAre(), ElementsAre("equity", "tech")));
  EXPECT_EQ(nq.declared_observed[0][3], 1.0);  // B
  EXPECT_EQ(nq.declared_known[0][5], 2.0);     // 5 % 3
  EXPECT_EQ(nq.declared_static[0][7], 0.5);
  EXPECT_EQ(nq.declared_static[1][7], 1.0);                 // tech
  EXPECT_EQ(bars.series[0].declared_observed[0][36], 2.0);  // C
}

TEST(CategoricalInputs, VocabulariesComeFromTheTrainingSplitAndNewLevelsAreUnknown) {
  test::TempDir dir;
  const auto bars = read_bars_csv(dir.write("c.csv", categorical_csv()), declaring_all());
  const auto dataset = Dataset::build(bars, small_windows());
  const auto& spec = dataset.schema();
  const auto& venue = spec.observed.back();
  EXPECT_EQ(venue.name, "venue");
  EXPECT_TRUE(venue.categorical);
  EXPECT_THAT(venue.levels, ElementsAre("A", "B"));  // C is only in ES's validation and test rows
  EXPECT_EQ(venue.categories(), 3);
  EXPECT_THAT(spec.known.back().levels, ElementsAre("0", "1", "2"));
  ASSERT_EQ(spec.statics.size(), 2u);
  // The static real standardized over the two series: mean 0.375, std 0.125.
  EXPECT_EQ(spec.statics[0].mean, 0.375);
  EXPECT_EQ(spec.statics[0].std, 0.125);
  EXPECT_THAT(spec.statics[1].levels, ElementsAre("equity", "tech"));

  // Features: row r is bar r + 1; a level's feature is its index + 1, C's is 0.
  const auto& es = dataset.series()[0];
  const size_t width = spec.observed.size();
  EXPECT_EQ(es.observed[0 * width + width - 1], 2.0f);                       // bar 1: B
  EXPECT_EQ(es.observed[1 * width + width - 1], 1.0f);                       // bar 2: A
  EXPECT_EQ(es.observed[34 * width + width - 1], 0.0f);                      // bar 35: C
  EXPECT_EQ(es.known[4 * spec.known.size() + spec.known.size() - 1], 3.0f);  // bar 5: level "2"
  EXPECT_THAT(std::vector<float>(es.statics.begin(), es.statics.end()), ElementsAre(-1.0f, 1.0f));
  const auto& nq = dataset.series()[1];
  EXPECT_THAT(std::vector<float>(nq.statics.begin(), nq.statics.end()), ElementsAre(1.0f, 2.0f));
  EXPECT_EQ(dataset.notes().unknown_category_rows, 5);  // ES's bars 35..39
  // Which input and level, once each: what serving names (Forecast::unknown_levels).
  EXPECT_THAT(featurize_series(bars.series[0], spec, 0).unknown_levels, ElementsAre(UnknownLevel{"venue", "C"}));
  EXPECT_THAT(featurize_series(bars.series[1], spec, 1).unknown_levels, ElementsAre());
  // So is a level of a row ahead, the known column's only there: a forecast's future rows.
  std::vector<UnknownLevel> ahead;
  const std::vector<std::vector<double>> future_known{{1.0, 3.0}};
  const std::vector<std::vector<std::string>> future_levels{{"0", "1", "2", "7"}};
  const auto future = known_inputs_at(std::vector<int64_t>{0, 1}, future_known, spec, 0, future_levels, &ahead);
  EXPECT_THAT(ahead, ElementsAre(UnknownLevel{spec.known.back().name, "7"}));
  EXPECT_EQ(future.back(), 0.0f);  // the unknown entry
  const auto summary = summarize_dataset(dataset);
  EXPECT_THAT(summary, HasSubstr("static [symbol, tick, sector]"));
  EXPECT_THAT(summary, HasSubstr("input counts: 3 observed (1 declared, 1 of them categorical), 5 known (1 declared, "
                                 "1 of them categorical), 3 static (2 declared, 1 of them categorical)"));
  EXPECT_THAT(summary, HasSubstr("unknown levels: 5 rows hold a categorical level the training split does not have"));

  // The spec keeps the vocabularies and the statics; a saved spec reads a file alike.
  const auto reread = input_schema_from_json(to_json(spec));
  EXPECT_EQ(to_json(reread).dump(), to_json(spec).dump());
  EXPECT_THAT(reread.observed.back().levels, ElementsAre("A", "B"));
  EXPECT_EQ(reread.declared.static_categorical, std::vector<std::string>{"sector"});
  const auto again = Dataset::build(bars, small_windows(), reread);
  EXPECT_EQ(std::memcmp(again.series()[0].observed.data(), es.observed.data(), es.observed.size_bytes()), 0);
}

TEST(CategoricalInputs, AStaticThatChangesWithinASeriesNamesTheSeriesAndTheRow) {
  test::TempDir dir;
  const auto file = dir.write("c.csv", categorical_csv(/*tick_at=*/5));
  EXPECT_EQ(test::error_message([&] { read_bars_csv(file, declaring_all()); }),
            file +
                ": column 'tick', row 46: static input of symbol 'NQ' changes to 0.75 from 0.5 (row 41): a static "
                "input is constant within a series");
  // A static categorical names its levels.
  BarReadOptions options;
  options.inputs.static_categorical = {"venue"};
  EXPECT_EQ(test::error_message([&] { read_bars_csv(file, options); }),
            file +
                ": column 'venue', row 2: static input of symbol 'ES' changes to 'B' from 'A' (row 1): a static "
                "input is constant within a series");
  // In memory, validate_series says the same of a series built by a program.
  auto bars = read_bars_csv(dir.write("ok.csv", categorical_csv()), declaring_all());
  bars.series[1].declared_static[0][9] = 0.75;
  EXPECT_THAT(test::error_message([&] { validate_series(bars.series[1], "feed"); }),
              HasSubstr("feed: symbol 'NQ': bar 10 (2024-01-02T09:15:00Z): declared static input 1 0.75 differs from "
                        "its value 0.5 at bar 1"));
  bars.series[1].declared_static[0][9] = 0.5;
  bars.series[1].declared_observed[0][2] = 3.0;
  EXPECT_THAT(test::error_message([&] { validate_series(bars.series[1], "feed"); }),
              HasSubstr("declared observed input 1 3 is not the index of one of its 3 levels"));
}

TEST(CategoricalInputs, MoreLevelsThanTheCapIsAMistakenRealColumn) {
  test::TempDir dir;
  std::ostringstream out;
  out << "timestamp,close,code\n";
  for (size_t i = 0; i <= kMaxCategoryLevels; ++i)
    out << format_utc((1704184200LL + 300LL * static_cast<int64_t>(i)) * 1'000'000'000) << ",100.5,L" << i << "\n";
  const auto file = dir.write("wide.csv", out.str());
  BarReadOptions options;
  options.inputs.observed_categorical = {"code"};
  EXPECT_THAT(test::error_message([&] { read_bars_csv(file, options); }),
              HasSubstr(file + ": column 'code', row 10001: level 'L10000' is one more than the 10000 a categorical "
                               "input may have"));
  // A real column cannot be categorical either way round: floats are refused.
  BarReadOptions real;
  real.inputs.static_categorical = {"close"};
  EXPECT_THAT(test::error_message([&] { read_bars_csv(file, real); }),
              HasSubstr("column 'close': has type double, expected text, dictionary or integer levels"));
}

TEST(CategoricalInputs, AFolderAndItsStoreCarryThemBitwiseAsMemoryDoes) {
  test::TempDir dir;
  const auto bars = read_bars_csv(dir.write("c.csv", categorical_csv()), declaring_all());
  BarSource source;
  source.parquet_file = dir.file("bars");
  write_parquet_partitions(bars, source.parquet_file);
  source.read = declaring_all();
  StorePreparation built;
  const auto stored =
      open_dataset(source, small_windows(), nullptr, StoreAccess::BuildIfNeeded, [&](const auto& p) { built = p; });
  EXPECT_TRUE(built.built);
  BarSource in_memory = source;
  in_memory.in_memory = true;
  const auto direct = open_dataset(in_memory, small_windows(), nullptr);
  EXPECT_EQ(to_json(stored.schema()).dump(), to_json(direct.schema()).dump());
  EXPECT_EQ(stored.notes().unknown_category_rows, 5);
  ASSERT_EQ(stored.series().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto &a = stored.series()[i], &b = direct.series()[i];
    ASSERT_EQ(a.observed.size(), b.observed.size());
    EXPECT_EQ(std::memcmp(a.observed.data(), b.observed.data(), a.observed.size_bytes()), 0);
    EXPECT_EQ(std::memcmp(a.known.data(), b.known.data(), a.known.size_bytes()), 0);
    EXPECT_EQ(std::vector<float>(a.statics.begin(), a.statics.end()),
              std::vector<float>(b.statics.begin(), b.statics.end()));
  }
  // A model's declaration reads the folder into the same store.
  const auto spec = stored.schema();
  EXPECT_EQ(prepare_feature_store(source, small_windows(), &spec).path, built.path);
}

}  // namespace
}  // namespace qtft::data
