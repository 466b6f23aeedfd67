// Declared inputs: columns of a file read as the model's real inputs beside the derived
// ones, resolved from names and globs, normalized on the training split, saved in the spec,
// carried through folders and feature stores, and refused clearly when they do not fit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "qtft/common/format.h"
#include "qtft/data/bars/arrow_bars.h"
#include "qtft/data/bars/bar_source.h"
#include "qtft/data/bars/input_declaration.h"
#include "qtft/data/bars/parquet_dataset.h"
#include "qtft/data/bars/synthetic.h"
#include "qtft/data/features/dataset_summary.h"
#include "qtft/data/features/detail/input_schema_json.h"
#include "qtft/data/store/feature_store.h"
#include "support/bar_files.h"
#include "support/temp_dir.h"
#include "support/tiny_windows.h"

namespace qtft::data {
namespace {

namespace fs = std::filesystem;
using test::tiny_windows;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Names = std::vector<std::string>;

const Names kColumns{"timestamp", "symbol", "close", "f_b", "lead", "f_a", "sched", "note"};
const Names kBarColumns{"open", "high", "low", "close", "volume"};
const Names kNotInputs{"timestamp", "symbol"};

InputDeclaration resolve(const InputDeclaration& d, std::vector<std::string>* unused = nullptr) {
  return resolve_inputs(d, kColumns, kBarColumns, kNotInputs, "f.csv", unused);
}

TEST(InputResolution, NamesInDeclarationOrderGlobsInFileOrderTheRestUnused) {
  std::vector<std::string> unused;
  const auto r = resolve({{"lead", "f_*"}, {"sched"}}, &unused);
  EXPECT_THAT(r.observed, ElementsAre("lead", "f_b", "f_a"));
  EXPECT_THAT(r.known, ElementsAre("sched"));
  EXPECT_THAT(unused, ElementsAre("note"));
  // Nothing declared: every column beside the bars' is unused.
  std::vector<std::string> all_unused;
  resolve({}, &all_unused);
  EXPECT_THAT(all_unused, ElementsAre("f_b", "lead", "f_a", "sched", "note"));
}

TEST(InputResolution, AGlobNeverTakesABarOrKeyColumnButANameMay) {
  EXPECT_THAT(resolve({{"*"}, {}}).observed, ElementsAre("f_b", "lead", "f_a", "sched", "note"));
  EXPECT_THAT(resolve({{"close"}, {}}).observed, ElementsAre("close"));
}

TEST(InputResolution, MistakesNameTheFileTheFlagAndTheColumn) {
  EXPECT_EQ(test::error_message([] {
              resolve({{"lead", "missing"}, {}});
            }),
            "f.csv: --observed column 'missing' is not in the file (columns: timestamp, symbol, close, f_b, lead, "
            "f_a, sched, note)");
  EXPECT_THAT(test::error_message([] {
                resolve({{}, {"g_*"}});
              }),
              HasSubstr("f.csv: --known pattern 'g_*' matches no column (columns: timestamp,"));
  EXPECT_EQ(test::error_message([] {
              resolve({{"f_*", "f_a"}, {}});
            }),
            "f.csv: column 'f_a' is declared twice: by --observed 'f_*' and by --observed 'f_a'");
  EXPECT_EQ(test::error_message([] {
              resolve({{"sched"}, {"sched"}});
            }),
            "f.csv: column 'sched' is declared twice: by --observed 'sched' and by --known 'sched'");
  EXPECT_EQ(test::error_message([] {
              resolve({{"timestamp"}, {}});
            }),
            "f.csv: --observed column 'timestamp' is the file's timestamp or symbol column, not an input");
}

TEST(InputDeclarationFile, ListsByKindAndMistakesWithLineAndColumn) {
  test::TempDir dir;
  const auto d = read_input_declaration(dir.write("in.json", R"({"observed": ["lead", "f_*"], "known": ["sched"]})"));
  EXPECT_THAT(d.observed, ElementsAre("lead", "f_*"));
  EXPECT_THAT(d.known, ElementsAre("sched"));
  InputDeclaration flags{{"x"}, {}};
  append_declaration(flags, d);
  EXPECT_THAT(flags.observed, ElementsAre("x", "lead", "f_*"));

  const auto bad = dir.write("bad.json", "{\n  \"observed\": [\"a\",,]\n}");
  EXPECT_THAT(test::error_message([&] { read_input_declaration(bad); }),
              HasSubstr(bad + ": not a JSON input declaration: [json.exception.parse_error.101] parse error at line 2, "
                              "column 20"));
  const auto key = dir.write("key.json", R"({"observd": []})");
  EXPECT_EQ(test::error_message([&] { read_input_declaration(key); }),
            key +
                ": unknown key 'observd' (an input declaration has observed, known, static, observed_categorical, "
                "known_categorical, static_categorical and calendar)");
  const auto kinds = read_input_declaration(
      dir.write("kinds.json", R"({"static": ["tick"], "observed_categorical": ["venue"], "known_categorical": )"
                              R"(["session"], "static_categorical": ["sector", "x_*"]})"));
  EXPECT_THAT(kinds.statics, ElementsAre("tick"));
  EXPECT_THAT(kinds.observed_categorical, ElementsAre("venue"));
  EXPECT_THAT(kinds.known_categorical, ElementsAre("session"));
  EXPECT_THAT(kinds.static_categorical, ElementsAre("sector", "x_*"));
  append_declaration(flags, kinds);
  EXPECT_THAT(flags.static_categorical, ElementsAre("sector", "x_*"));
  const auto number = dir.write("number.json", R"({"known": ["a", 3]})");
  EXPECT_EQ(test::error_message([&] { read_input_declaration(number); }),
            number + ": 'known' holds 3, not a column name or glob");
}

// Two symbols of 20 bars, 5 minutes apart, with a declared observed column x = row number
// and a known column k = 10 x row number, plus a column nobody reads.
// `x_cells` replaces x's cells of ES (the first 20 data rows), by bar.
std::string declared_csv(const std::map<int, std::string>& x_cells = {}) {
  std::ostringstream out;
  out << "timestamp,symbol,close,x,k,note\n";
  for (int s = 0; s < 2; ++s) {
    for (int i = 0; i < 20; ++i) {
      const int64_t ns = (1704184200LL + 300LL * i) * 1'000'000'000;
      const auto cell = s == 0 ? x_cells.find(i) : x_cells.end();
      const std::string x = cell != x_cells.end() ? cell->second : std::to_string(i);
      out << format_utc(ns) << "," << (s ? "NQ" : "ES") << "," << 100 + i + s << "," << x << "," << 10 * i << ",abc\n";
    }
  }
  return out.str();
}

BarReadOptions declaring(Names observed, Names known) {
  BarReadOptions o;
  o.inputs = {std::move(observed), std::move(known)};
  return o;
}

TEST(DeclaredInputs, AFileCarriesTheDeclaredColumnsPerSeries) {
  test::TempDir dir;
  const auto bars = read_bars_csv(dir.write("d.csv", declared_csv()), declaring({"x"}, {"k"}));
  EXPECT_THAT(bars.declared.observed, ElementsAre("x"));
  EXPECT_THAT(bars.declared.known, ElementsAre("k"));
  EXPECT_THAT(bars.unused_columns, ElementsAre("note"));
  ASSERT_EQ(bars.series.size(), 2u);
  ASSERT_EQ(bars.series[1].declared_observed.size(), 1u);
  EXPECT_EQ(bars.series[1].declared_observed[0][7], 7.0);
  EXPECT_EQ(bars.series[1].declared_observed[0].size(), 20u);
  EXPECT_EQ(bars.series[1].declared_known[0][19], 190.0);
}

TEST(DeclaredInputs, BadCellsNameTheFileColumnAndRow) {
  test::TempDir dir;
  const auto with = [&](const std::string& cell) {
    return test::error_message([&] {
      read_bars_csv(dir.write("d.csv", declared_csv({{3, cell}})), declaring({"x"}, {}));
    });
  };
  EXPECT_EQ(with("NA"),
            dir.file("d.csv") +
                ": column 'x', row 4: missing value (null or NaN) inside symbol 'ES', whose declared inputs are "
                "complete since row 1: give --missing forward-fill to carry the previous value forward");
  EXPECT_EQ(with("nan"), with("NA"));  // NaN is missing, as pandas writes it
  EXPECT_THAT(with("inf"), HasSubstr("d.csv: column 'x', row 4: value inf is not finite"));
  EXPECT_THAT(test::error_message([&] { read_bars_csv(dir.write("t.csv", declared_csv()), declaring({"note"}, {})); }),
              HasSubstr("t.csv: column 'note': has type string, expected a number"));
}

TEST(MissingValues, LeadingNullsDropTheirBarsPerSeriesAndForwardFillCarriesTheRest) {
  test::TempDir dir;
  // Null and NaN alike: the leading ones a warm-up, the others filled.
  const auto file = dir.write("d.csv", declared_csv({{0, ""}, {1, "NaN"}, {2, ""}, {9, "nan"}, {10, ""}}));
  auto options = declaring({"x"}, {});
  options.inputs.missing = MissingValues::ForwardFill;
  const auto bars = read_bars_csv(file, options);
  EXPECT_EQ(bars.leading_null_rows, 3);
  ASSERT_EQ(bars.series[0].size(), 17u);  // ES from its bar 3 on; NQ whole
  EXPECT_EQ(bars.series[1].size(), 20u);
  EXPECT_EQ(bars.series[0].timestamp_ns.front(), (1704184200LL + 300LL * 3) * 1'000'000'000);
  const auto& x = bars.series[0].declared_observed[0];
  EXPECT_EQ(x[5], 8.0);  // bar 8
  EXPECT_EQ(x[6], 8.0);  // bars 9 and 10 carry bar 8's value
  EXPECT_EQ(x[7], 8.0);
  EXPECT_EQ(x[8], 11.0);

  // The spec records the choice, and a model reads its bars the same way.
  const auto spec = Dataset::build(bars, tiny_windows()).schema();
  EXPECT_EQ(spec.missing(), MissingValues::ForwardFill);
  EXPECT_EQ(to_json(spec).at("missing"), "forward-fill");
  EXPECT_EQ(input_schema_from_json(to_json(spec)).missing(), MissingValues::ForwardFill);
  BarSource source;
  source.csv_file = file;
  const auto applied = open_dataset(source, tiny_windows(), &spec);
  EXPECT_EQ(applied.notes().leading_null_rows, 3);
  EXPECT_THAT(summarize_dataset(applied), HasSubstr("dropped: 3 leading bars whose declared inputs were still null"));
}

TEST(MissingValues, ASeriesContinuesFromFileToFileOfAFolder) {
  test::TempDir dir;
  // ES's x begins in the first file; the second file opens with a null, which is inside the
  // series, not a warm-up: an error, or the first file's last value.
  std::istringstream lines(declared_csv({{10, ""}}));
  std::string header, line, first, second;
  std::getline(lines, header);
  for (int row = 0; row < 20 && std::getline(lines, line); ++row) (row < 10 ? first : second) += line + "\n";
  const std::string folder = dir.file("bars");
  fs::create_directories(folder);
  write_parquet_table(*read_csv_table(dir.write("1.csv", header + "\n" + first)), folder + "/part-0.parquet");
  write_parquet_table(*read_csv_table(dir.write("2.csv", header + "\n" + second)), folder + "/part-1.parquet");
  EXPECT_THAT(test::error_message([&] { read_bars_parquet_dataset(folder, declaring({"x"}, {})); }),
              HasSubstr("part-1.parquet: column 'x', row 1: missing value (null or NaN) inside symbol 'ES', whose "
                        "declared inputs are complete since an earlier file"));
  auto options = declaring({"x"}, {});
  options.inputs.missing = MissingValues::ForwardFill;
  const auto bars = read_bars_parquet_dataset(folder, options);
  ASSERT_EQ(bars.series[0].size(), 20u);
  EXPECT_EQ(bars.series[0].declared_observed[0][10], 9.0);
  EXPECT_EQ(bars.leading_null_rows, 0);
}

TEST(DeclaredInputs, FollowTheDerivedInputsNormalizedOnTheTrainingSplit) {
  test::TempDir dir;
  const auto bars = read_bars_csv(dir.write("d.csv", declared_csv()), declaring({"x"}, {"k"}));
  const auto d = Dataset::build(bars, tiny_windows());
  const auto& spec = d.schema();
  ASSERT_EQ(spec.observed.size(), 3u);  // log_return, bar_gap, x
  EXPECT_EQ(spec.observed[2].name, "x");
  EXPECT_EQ(spec.observed[2].source, InputSource::Column);
  EXPECT_EQ(spec.observed[0].source, InputSource::Derived);
  ASSERT_EQ(spec.known.size(), 5u);  // four calendar terms, k
  // 19 feature rows per series (bars 2..20), the first floor(19 x 0.6) = 11 train: x = 1..11
  // in both series, so mean 6 and population variance (11^2 - 1) / 12 = 10.
  EXPECT_NEAR(spec.observed[2].mean, 6.0, 1e-12);
  EXPECT_NEAR(spec.observed[2].std, std::sqrt(10.0), 1e-12);
  EXPECT_NEAR(spec.known[4].mean, 60.0, 1e-12);
  const auto& s = d.series()[0];
  EXPECT_FLOAT_EQ(s.observed[2], static_cast<float>((1.0 - 6.0) / std::sqrt(10.0)));  // row 0 is bar 2
  EXPECT_FLOAT_EQ(s.known[4 + 5 * 18], static_cast<float>((190.0 - 60.0) / (10.0 * std::sqrt(10.0))));
  EXPECT_EQ(d.notes().unused_columns, (Names{"note"}));
  const auto summary = summarize_dataset(d);
  EXPECT_THAT(summary, HasSubstr("observed [log_return, bar_gap, x]"));
  EXPECT_THAT(summary, HasSubstr("input counts: 3 observed (1 declared), 5 known (1 declared), 1 static\n"));
  EXPECT_THAT(summary, HasSubstr("not used: 1 column: note\n"));
}

// A schema's producers as fitted and as a loader reads them back from the saved names are
// the same: the bars a saved model reads are those it was trained on.
TEST(InputSchema, ASavedSchemaReadsBackTheProducersItWasFittedWith) {
  BarSet bars = test::regular_bar_set(120, 2);
  InputDeclaration& d = bars.declared;
  d.observed = {"flow"};
  d.observed_categorical = {"phase"};
  d.known = {"event"};
  d.statics = {"tick"};
  d.static_categorical = {"sector"};
  d.missing = MissingValues::ForwardFill;
  d.calendar_timezone = "America/Chicago";
  d.calendar = std::vector{CalendarTerm::DayOfWeek, CalendarTerm::TimeOfDay};
  d.target = {"level", TargetTransform::Log, Normalization::PerSeries};
  for (size_t k = 0; k < bars.series.size(); ++k) {
    auto& s = bars.series[k];
    const size_t n = s.size();
    std::vector<double> flow(n), phase(n), event(n), level(n);
    for (size_t i = 0; i < n; ++i) {
      flow[i] = std::sin(0.1 * static_cast<double>(i + k));
      phase[i] = static_cast<double>(i % 2);
      event[i] = static_cast<double>(i % 7 == 0);
      level[i] = 100.0 + static_cast<double>(i % 5);
    }
    s.declared_observed = {flow, phase};
    s.observed_levels = {{}, {"a", "b"}};
    s.declared_known = {event};
    s.declared_static = {std::vector<double>(n, 1.0 + static_cast<double>(k)), std::vector<double>(n, 0.0)};
    s.static_levels = {{}, {k == 0 ? "x" : "y"}};
    s.target_values = level;
  }
  const InputSchema fitted = Dataset::build(bars, tiny_windows()).schema();
  EXPECT_THAT(fitted.derived.known, ElementsAre(DerivedInput::DayOfWeekSin, DerivedInput::DayOfWeekCos,
                                                DerivedInput::TimeOfDaySin, DerivedInput::TimeOfDayCos));
  EXPECT_EQ(fitted.derived.observed.back(), DerivedInput::PastTarget);
  EXPECT_FALSE(fitted.declared.calendar.has_value());  // the terms are derived.known's
  EXPECT_TRUE(fitted.declared.from_model);
  EXPECT_TRUE(fitted.declared.same_columns(d));

  const InputSchema loaded = input_schema_from_json(to_json(fitted));
  EXPECT_EQ(loaded.derived, fitted.derived);
  EXPECT_TRUE(loaded.declared.same_columns(fitted.declared));
  EXPECT_EQ(loaded.calendar_timezone(), "America/Chicago");
  EXPECT_FALSE(loaded.declared.calendar.has_value());
  EXPECT_TRUE(loaded.declared.from_model);
  // Either turns the bars it was fitted on into the same features, bit for bit.
  const auto by_loaded = Dataset::build(bars, tiny_windows(), loaded);
  const auto by_fitted = Dataset::build(bars, tiny_windows(), fitted);
  ASSERT_EQ(by_loaded.series().size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const auto& a = by_loaded.series()[k];
    const auto& b = by_fitted.series()[k];
    ASSERT_EQ(a.observed.size(), b.observed.size());
    ASSERT_EQ(a.known.size(), b.known.size());
    EXPECT_EQ(std::memcmp(a.observed.data(), b.observed.data(), a.observed.size_bytes()), 0) << k;
    EXPECT_EQ(std::memcmp(a.known.data(), b.known.data(), a.known.size_bytes()), 0) << k;
    EXPECT_EQ(std::memcmp(a.target.data(), b.target.data(), a.target.size_bytes()), 0) << k;
  }
}

TEST(DeclaredInputs, TheSpecRecordsThemAndAModelReadsExactlyThose) {
  test::TempDir dir;
  const auto file = dir.write("d.csv", declared_csv());
  const auto spec = Dataset::build(read_bars_csv(file, declaring({"x"}, {"k"})), tiny_windows()).schema();
  const auto json = to_json(spec);
  EXPECT_EQ(json.at("observed").at(2).at("source"), "column");
  EXPECT_FALSE(json.at("observed").at(0).contains("source"));  // derived inputs are written as before
  EXPECT_EQ(to_json(input_schema_from_json(json)).dump(), json.dump());
  const auto declaration = spec.declared;
  EXPECT_THAT(declaration.observed, ElementsAre("x"));
  EXPECT_THAT(declaration.known, ElementsAre("k"));

  // The model's columns are read whatever the source declared.
  BarSource source;
  source.csv_file = file;
  const auto applied = open_dataset(source, tiny_windows(), &spec);
  EXPECT_EQ(applied.num_observed(), 3u);
  // Bars read without them are refused, naming the columns.
  EXPECT_THAT(test::error_message([&] { Dataset::build(load_bars(source), tiny_windows(), spec); }),
              HasSubstr(file + ": the model reads the declared columns observed [x], known [k] but the bars were "
                               "read with observed [], known []"));
  // And the calendar alone cannot stand for a declared known input's future.
  EXPECT_THAT(test::error_message([&] { known_inputs_at(std::vector<int64_t>{0}, spec); }),
              HasSubstr("the model reads the declared known column 'k'"));
}

TEST(DeclaredInputs, TheEmbeddedDataHasNoColumnsToDeclare) {
  BarSource source;
  source.read.inputs.observed = {"lead_signal"};
  EXPECT_THAT(test::error_message([&] { load_bars(source); }), HasSubstr("qtft make-data --extra-inputs"));
}

SyntheticOptions with_extras(int extra) {
  SyntheticOptions o;
  o.rows = 6'000;
  o.symbols = 2;
  o.bar_minutes = 30;
  o.extra_inputs = extra;
  return o;
}

template <class T>
bool same_bits(std::span<const T> a, std::span<const T> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

TEST(DeclaredInputs, AFolderAndItsStoreCarryThemBitwiseAsMemoryDoes) {
  test::TempDir dir;
  BarSource source;
  source.parquet_file = dir.file("bars");
  write_parquet_partitions(generate_synthetic_bars(with_extras(6)), source.parquet_file);
  source.read.inputs = {{"lead_signal", "f*"}, {"event_flag"}};
  DatasetOptions windows;
  windows.encoder_length = 16;
  windows.horizon = 4;
  StorePreparation built;
  const auto stored =
      open_dataset(source, windows, nullptr, StoreAccess::BuildIfNeeded, [&](const auto& p) { built = p; });
  EXPECT_TRUE(built.built);
  BarSource in_memory = source;
  in_memory.in_memory = true;
  const auto direct = open_dataset(in_memory, windows, nullptr);
  EXPECT_EQ(to_json(stored.schema()).dump(), to_json(direct.schema()).dump());
  EXPECT_EQ(stored.num_observed(), 5u + 4u);  // log_return, hl_range, close_open, log_volume, bar_gap, 4 columns
  EXPECT_EQ(stored.num_known(), 5u);
  ASSERT_EQ(stored.series().size(), direct.series().size());
  for (size_t i = 0; i < stored.series().size(); ++i) {
    EXPECT_TRUE(same_bits(stored.series()[i].observed, direct.series()[i].observed));
    EXPECT_TRUE(same_bits(stored.series()[i].known, direct.series()[i].known));
  }

  // The declaration is part of the store's name: the glob and the names it matches (a
  // model's) are one store; another declaration is another store.
  const auto spec = stored.schema();
  EXPECT_EQ(prepare_feature_store(source, windows, &spec).path, built.path);
  BarSource by_name = source;
  by_name.read.inputs = {{"lead_signal", "f00", "f01", "f02"}, {"event_flag"}};
  EXPECT_FALSE(prepare_feature_store(by_name, windows, nullptr).built);
  BarSource fewer = source;
  fewer.read.inputs = {{"lead_signal"}, {}};
  EXPECT_TRUE(prepare_feature_store(fewer, windows, nullptr).built);
  EXPECT_EQ(map_feature_store(prepare_feature_store(fewer, windows, nullptr).path, windows).notes().unused_columns,
            (Names{"f00", "f01", "f02", "event_flag", "vol_class"}));
}

TEST(SyntheticExtras, LeadTheNextReturnAndScheduleVolatileReleases) {
  const auto plain = generate_synthetic_bars(with_extras(0));
  const auto lead_only = generate_synthetic_bars(with_extras(1));
  const auto all = generate_synthetic_bars(with_extras(5));
  EXPECT_THAT(all.declared.observed, ElementsAre("lead_signal", "f00", "f01"));
  EXPECT_THAT(all.declared.known, ElementsAre("event_flag"));
  // A static category per symbol: ES trades in the high volatility class, GC in the low.
  EXPECT_THAT(all.declared.static_categorical, ElementsAre("vol_class"));
  EXPECT_THAT(all.series[0].static_levels, ElementsAre(ElementsAre("high")));
  EXPECT_THAT(generate_synthetic_symbol(with_extras(3), 3).series[0].static_levels, ElementsAre(ElementsAre("low")));
  // The observed columns come from a stream of their own: the bars do not move.
  EXPECT_EQ(lead_only.series[0].close, plain.series[0].close);
  EXPECT_TRUE(plain.series[0].declared_observed.empty());

  const auto& s = all.series[0];
  // lead_signal correlates with the next bar's return (0.7 / sqrt(0.49 + 0.51) in theory,
  // less where regimes and releases make returns wider than the typical volatility).
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    const double x = s.declared_observed[0][i], y = std::log(s.close[i + 1] / s.close[i]);
    sxy += x * y;
    sxx += x * x;
    syy += y * y;
  }
  EXPECT_GT(sxy / std::sqrt(sxx * syy), 0.4);
  // Releases at 10:00 UTC, on about a third of the days, the same for every symbol.
  size_t releases = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.declared_known[0][i] == 0.0) continue;
    ++releases;
    EXPECT_EQ(format_utc(s.timestamp_ns[i]).substr(11, 5), "10:00");
  }
  const double days = static_cast<double>(s.size()) / 13.0;  // 13 bars of 30 minutes a session
  EXPECT_NEAR(static_cast<double>(releases) / days, 1.0 / 3.0, 0.08);
  EXPECT_EQ(all.series[1].declared_known[0], s.declared_known[0]);
}

}  // namespace
}  // namespace qtft::data
