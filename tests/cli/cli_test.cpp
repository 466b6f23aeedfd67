// The qtft binary as users run it: exit codes, one-line errors that name the fault, and
// the commands this build delivers, end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "qtft/io/safetensors.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Run = test::CliRun;

Run qtft(const test::TempDir& dir, const std::string& args) { return test::run_qtft(dir, args); }

// Enough training to exercise the path, small enough for a test.
const std::string kQuickTrain = " --epochs 1 --max-batches-per-epoch 2 --hidden-size 8 --attention-heads 2";

int lines(const std::string& text) { return static_cast<int>(std::count(text.begin(), text.end(), '\n')); }

TEST(Cli, HelpForEveryCommandExitsZero) {
  test::TempDir dir;
  for (std::string cmd : {"", "make-data ", "convert ", "inspect ", "train "}) {
    auto run = qtft(dir, cmd + "--help");
    EXPECT_EQ(run.exit_code, 0) << cmd;
    EXPECT_THAT(run.out, HasSubstr("Usage")) << cmd;
  }
}

// run_qtft runs the commands that take --device on the CPU (test::on_the_cpu); its list is
// theirs: every command whose help shows --device is on it, and no other.
TEST(Cli, DeviceFlagIsTakenByTheCommandsPinnedToTheCpu) {
  test::TempDir dir;
  for (std::string cmd :
       {"make-data", "prepare", "convert", "inspect", "train", "evaluate", "predict", "forecast", "explain", "quantize",
        "export-int8", "export-onnx", "memory-report", "diff", "watch", "backtest", "tune", "report"}) {
    auto run = qtft(dir, cmd + " --help");
    ASSERT_EQ(run.exit_code, 0) << cmd << "\n" << run.err;
    EXPECT_EQ(run.out.find("--device") != std::string::npos, test::takes_device_flag(cmd)) << cmd;
  }
}

TEST(Cli, UsageErrorsExitTwo) {
  test::TempDir dir;
  EXPECT_EQ(qtft(dir, "").exit_code, 2);
  EXPECT_EQ(qtft(dir, "make-data").exit_code, 2);  // --output is required
  auto run = qtft(dir, "train --horizon 0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--horizon must be at least 1, got 0"));
  run = qtft(dir, "train --parquet-file " + dir.file("nope.parquet"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("nope.parquet"));
  run = qtft(dir, "make-data --output " + dir.file("x.txt"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.txt")));
}

TEST(Cli, AFlagGivenTwiceTakesItsLastValue) {
  test::TempDir dir;
  auto run = qtft(dir, "make-data --output " + dir.file("bars.csv") + " --rows 800 --symbols 1 --rows 500");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr(": 500 bars"));
  run = qtft(dir, "train --csv-file " + dir.file("bars.csv") + " --encoder-length 16 --horizon 4" + kQuickTrain +
                      " --horizon 0");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--horizon must be at least 1, got 0"));
}

TEST(Cli, BadDataExitsOneWithOneLineNamingFileColumnRow) {
  test::TempDir dir;
  auto path = dir.write("bad.csv",
                        "timestamp,open,high,low,close\n2024-01-02T08:30:00Z,1,2,0.5,1.5\n"
                        "2024-01-02T08:35:00Z,1,0.75,0.9,0.8\n");
  auto run = qtft(dir, "train --csv-file " + path);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "qtft: error: " + path + ": column 'high', row 2: high 0.75 is below low 0.9\n");
  EXPECT_EQ(lines(run.err), 1);
}

TEST(Cli, MakeDataThenTrainReadsItBack) {
  test::TempDir dir;
  auto parquet = dir.file("bars.parquet");
  auto run = qtft(dir, "make-data --output " + parquet + " --rows 3000 --symbols 2 --seed 9");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("3000 bars, 2 symbols"));
  run = qtft(dir, "train --parquet-file " + parquet + " --encoder-length 16 --horizon 4" + kQuickTrain);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("rows: 3000 bars, 2 symbols (ES: 1500, NQ: 1500)"));
  EXPECT_THAT(run.out, HasSubstr("windows (encoder 16, horizon 4): train"));
  EXPECT_THAT(run.out, Not(HasSubstr("embedded")));
}

TEST(Cli, TrainWithoutDataSaysItUsesTheEmbeddedSet) {
  test::TempDir dir;
  auto run = qtft(dir, "train" + kQuickTrain);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("No --parquet-file or --csv-file given: training on the embedded synthetic data"));
  EXPECT_THAT(run.out, HasSubstr("Summary:"));
}

TEST(Cli, ConvertValidatesThenWritesParquet) {
  test::TempDir dir;
  auto csv = dir.file("bars.csv");
  ASSERT_EQ(qtft(dir, "make-data --output " + csv + " --rows 500 --symbols 1").exit_code, 0);
  auto parquet = dir.file("bars.parquet");
  auto run = qtft(dir, "convert " + csv + " " + parquet);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("500 rows"));
  EXPECT_EQ(qtft(dir, "train --parquet-file " + parquet + " --encoder-length 8 --horizon 2" + kQuickTrain).exit_code,
            0);

  auto bad = dir.write("bad.csv", "timestamp,close\n2024-01-02T08:30:00Z,-1\n");
  run = qtft(dir, "convert " + bad + " " + dir.file("bad.parquet"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("price -1 is not positive"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad.parquet")));
}

TEST(Cli, InspectListsTensorsAndMetadata) {
  test::TempDir dir;
  std::vector<float> weights{1, 2, 3, 4, 5, 6};
  io::write_safetensors(dir.file("m.safetensors"),
                        {{"encoder.weight",
                          io::DType::F32,
                          {2, 3},
                          {reinterpret_cast<const std::byte*>(weights.data()), weights.size() * 4}}},
                        {{"config", R"({"hidden_size":64})"}, {"note", "hello"}});
  auto run = qtft(dir, "inspect " + dir.file("m.safetensors"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("1 tensors, 24 B"));
  EXPECT_THAT(run.out, ::testing::ContainsRegex("encoder.weight +F32 +\\[2, 3\\]"));
  EXPECT_THAT(run.out, HasSubstr("\"hidden_size\": 64"));
  EXPECT_THAT(run.out, HasSubstr("note: hello"));

  auto bad = dir.write("bad.safetensors", std::string("\x08\0\0\0\0\0\0\0{}", 10));
  run = qtft(dir, "inspect " + bad);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(bad));
}

TEST(Cli, MalformedBarFilesAreRefusedByEveryCommandNamingTheRow) {
  // A small corpus of files that once slipped through; each must fail cleanly: exit 1, one
  // line naming the file and row, no stack trace, quickly.
  test::TempDir dir;
  const std::string header = "timestamp,symbol,close\n";
  struct Case {
    const char* name;
    std::string csv;
    const char* phrase;
  };
  const std::vector<Case> corpus{
      {"quote.csv", header + "2024-01-02T08:30:00Z,ES,1\n2024-01-02T08:35:00Z,\"ES,2\n2024-01-02T08:40:00Z,ES\",3\n",
       "row 2"},
      {"empty_symbol.csv", header + "2024-01-02T08:30:00Z,ES,1\n2024-01-02T08:35:00Z,,2\n", "row 2: empty symbol"},
      {"tiny_price.csv", header + "2024-01-02T08:30:00Z,ES,1e-320\n", "row 1: price 1e-320"},
      {"year.csv", header + "1500-01-02T08:30:00Z,ES,1\n", "outside the representable range"},
  };
  for (const auto& c : corpus) {
    const auto path = dir.write(c.name, c.csv);
    for (const std::string& command : {"train --csv-file " + path, "convert " + path + " " + dir.file("out.parquet")}) {
      SCOPED_TRACE(command);
      auto run = test::run_qtft(dir, command, test::kHangGuard);
      EXPECT_EQ(run.exit_code, 1) << run.err;  // 137 for a hang
      EXPECT_THAT(run.err, HasSubstr(path));
      EXPECT_THAT(run.err, HasSubstr(c.phrase));
      EXPECT_EQ(lines(run.err), 1) << run.err;
    }
  }
}

}  // namespace
}  // namespace qtft
