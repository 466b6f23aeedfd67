// `qtft export-onnx`: every kind of model the suite trains exports, passes the ONNX checker
// and runs in onnxruntime (scripts/check_onnx_export.py) as qtft forecasts it, on the
// tensors `qtft forecast --save-inputs` and `qtft evaluate --save-inputs` wrote.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <ATen/ops/zeros_like.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "qtft/io/tensor_file.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using test::run_qtft;
using ::testing::HasSubstr;

const std::string kGolden = std::string(QTFT_TEST_DATA_DIR) + "/golden/";

// How far onnxruntime may be from qtft, relative to the largest value of qtft's forecast
// (docs/DEPLOYMENT.md gives the measured figures): a float graph as FP32 rounds. A QDQ
// graph rounds each activation at x / scale where qtft multiplies by 1 / scale
// (quant/quant_params.h): near a tie the two pick neighbouring codes, and with 4-bit weights
// or 7-bit activations that moved a forecast by up to 2.5% of its scale (bench/
// onnx_agreement.py); the split's loss is held to 0.1%.
constexpr const char* kFloatTolerance = "1e-5";
constexpr const char* kQdqTolerance = "0.1";

struct CheckRun {
  int exit_code = -1;
  std::string output;
};

// scripts/check_onnx_export.py with `args`, in the venv's Python.
CheckRun check_in_onnxruntime(const test::TempDir& dir, const std::string& args) {
  const auto script = std::filesystem::path(QTFT_SOURCE_DIR) / "scripts" / "check_onnx_export.py";
  const std::string log = dir.file("check.log");
  const std::string command =
      "'" + std::string(QTFT_TEST_PYTHON) + "' '" + script.string() + "' " + args + " > '" + log + "' 2>&1";
  const int status = std::system(command.c_str());
  CheckRun run;
  run.output = test::read_text(log);
  if (status != -1 && WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

// Rows of a bar file by symbol, the header apart.
struct CsvRows {
  std::string header;
  std::map<std::string, std::vector<std::vector<std::string>>> by_symbol;
};

CsvRows read_rows(const std::string& path) {
  CsvRows rows;
  std::ifstream in(path);
  std::getline(in, rows.header);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields;
    std::stringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    rows.by_symbol[fields.at(1)].push_back(fields);
  }
  return rows;
}

class OnnxExportCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    // Columns: timestamp,symbol,open,high,low,close,volume,lead_signal,f00,f01,event_flag,vol_class.
    ASSERT_EQ(
        run_qtft(*dir_, "make-data --output " + dir_->file("full.csv") + " --rows 616 --symbols 2 --extra-inputs 5")
            .exit_code,
        0);
    // Bars 1-300 of each symbol train; bars 261-300 and the declared columns of bars 301-304
    // (the rows ahead) forecast.
    const CsvRows rows = read_rows(dir_->file("full.csv"));
    std::ofstream train(dir_->file("train.csv")), recent(dir_->file("recent.csv"));
    // A static real of our own, tick: the symbol's tick size.
    train << rows.header << ",tick\n";
    recent << rows.header << ",tick\n";
    double tick = 0.25;
    for (const auto& [symbol, bars] : rows.by_symbol) {
      const std::string tick_text = std::to_string(tick);
      tick *= 2.0;
      for (size_t k = 0; k < 304; ++k) {
        const auto& f = bars.at(k);
        std::string line = f[0];
        for (size_t c = 1; c < f.size(); ++c) line += "," + f[c];
        line += "," + tick_text;
        if (k < 300) train << line << "\n";
        if (k >= 260 && k < 300) recent << line << "\n";
        if (k >= 300) {
          recent << f[0] << "," << f[1] << ",,,,,,," << f[8] << ",," << f[10] << "," << f[11] << "," << tick_text
                 << "\n";
        }
      }
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  // Exports `model`, forecasts `bars` with it saving the inputs, and checks the graph's
  // forecast in onnxruntime against qtft's within `tolerance`; returns export's output.
  static std::string export_and_check_forecast(const std::string& model, const std::string& bars,
                                               const std::string& name, const char* tolerance,
                                               const std::string& forecast_flags = "") {
    const std::string graph = dir_->file(name + ".onnx"), inputs = dir_->file(name + "-inputs");
    auto exported = run_qtft(*dir_, "export-onnx --load-model " + model + " --output " + graph);
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    auto forecast = run_qtft(*dir_, "forecast --load-model " + model + " --csv-file " + bars +
                                        " --json --save-inputs " + inputs + forecast_flags);
    EXPECT_EQ(forecast.exit_code, 0) << forecast.err;
    const std::string json = dir_->write(name + ".forecast.json", forecast.out);
    const auto check =
        check_in_onnxruntime(*dir_, "forecast " + graph + " " + inputs + " " + json + " --rtol " + tolerance);
    EXPECT_EQ(check.exit_code, 0) << name << ":\n" << check.output;
    EXPECT_THAT(check.output, HasSubstr("\"pass\": true")) << name;
    return exported.out;
  }

  // Evaluates `model` on the test split saving every window, and checks the pinball loss of
  // the graph in onnxruntime against qtft's on the same windows (0.1%).
  static void check_split(const std::string& model, const std::string& graph, const std::string& name,
                          const std::string& flags = "") {
    const std::string windows = dir_->file(name + "-split");
    auto evaluated = run_qtft(*dir_, "evaluate --load-model " + model + " --csv-file " + dir_->file("train.csv") +
                                         " --split test --save-inputs " + windows + flags);
    ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
    const auto check = check_in_onnxruntime(*dir_, "split " + graph + " " + windows);
    EXPECT_EQ(check.exit_code, 0) << name << ":\n" << check.output;
    EXPECT_THAT(check.output, HasSubstr("\"pass\": true")) << name;
  }

  static test::TempDir* dir_;
};

test::TempDir* OnnxExportCli::dir_ = nullptr;

TEST_F(OnnxExportCli, TheGoldenModelsRunInOnnxRuntimeAsQtftForecastsThem) {
  // The default inputs (FP32 and 8-bit QAT), and declared observed reals, a known and a
  // static categorical with a calendar in a time zone and per-series scaling.
  ASSERT_EQ(run_qtft(*dir_, "make-data --output " + dir_->file("defaults.csv") + " --rows 600 --symbols 2").exit_code,
            0);
  for (const std::string kind : {"fp32", "qat"}) {
    const char* tolerance = kind == "fp32" ? kFloatTolerance : kQdqTolerance;
    const std::string out = export_and_check_forecast(kGolden + "defaults_3f2c661_" + kind + ".safetensors",
                                                      dir_->file("defaults.csv"), "defaults-" + kind, tolerance);
    EXPECT_THAT(out,
                HasSubstr(kind == "fp32" ? "(fp32) as a float ONNX graph at opset 17" : "(qat) as a QDQ ONNX graph"));
    export_and_check_forecast(kGolden + "declared_b7a7acb_" + kind + ".safetensors", kGolden + "declared_recent.csv",
                              "declared-" + kind, tolerance);
  }
  check_split(kGolden + "declared_b7a7acb_fp32.safetensors", dir_->file("declared-fp32.onnx"), "declared-fp32");
}

TEST_F(OnnxExportCli, EveryDeclaredKindAtFourBitsAndSevenBitActivationsAndItsInt8FileExportAsQdq) {
  // An observed categorical, a known real and a static real (the golden declared models have
  // the other kinds), at variable width 16 under a hidden size of 32, with 4-bit weights and
  // 7-bit activations (a Clip between each QuantizeLinear and DequantizeLinear).
  const std::string qat = dir_->file("kinds.qat.safetensors"), int8 = dir_->file("kinds.int8.safetensors");
  auto run =
      run_qtft(*dir_, "train --csv-file " + dir_->file("train.csv") +
                          " --observed lead_signal --observed-categorical event_flag --known f00 --static tick"
                          " --hidden-size 32 --variable-hidden-size 16 --attention-heads 2 --encoder-length 16"
                          " --horizon 4 --epochs 1 --max-batches-per-epoch 3 --batch-size 16 --seed 3"
                          " --use-qat --weight-bits 4 --activation-bits 7 --qat-calibration-batches 2 --save-model " +
                          qat);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  export_and_check_forecast(qat, dir_->file("recent.csv"), "kinds-qat", kQdqTolerance);
  ASSERT_EQ(run_qtft(*dir_, "export-int8 --load-model " + qat + " --output " + int8).exit_code, 0);
  const std::string out = export_and_check_forecast(int8, dir_->file("recent.csv"), "kinds-int8", kQdqTolerance,
                                                    " --int8-kernels dequantized");
  EXPECT_THAT(out, HasSubstr("(int8) as a QDQ ONNX graph"));
  // --int8 says it explicitly; a QAT file exports as QDQ with or without it.
  run = run_qtft(*dir_, "export-onnx --int8 --load-model " + int8 + " --output " + dir_->file("kinds-int8-again.onnx"));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(test::read_text(dir_->file("kinds-int8-again.onnx")), test::read_text(dir_->file("kinds-int8.onnx")));
  check_split(int8, dir_->file("kinds-int8.onnx"), "kinds-int8", " --int8-kernels dequantized");
}

TEST_F(OnnxExportCli, AWideModelAtVariableWidth16Exports) {
  // 38 declared inputs: the selection networks at the narrower default width.
  const std::string bars = dir_->file("wide.csv"), model = dir_->file("wide.safetensors");
  ASSERT_EQ(run_qtft(*dir_, "make-data --output " + bars + " --rows 400 --symbols 2 --extra-inputs 40").exit_code, 0);
  auto run = run_qtft(*dir_, "train --csv-file " + bars +
                                 " --observed lead_signal,'f*' --hidden-size 32 --attention-heads 2 --encoder-length 12"
                                 " --horizon 3 --epochs 1 --max-batches-per-epoch 2 --batch-size 16 --save-model " +
                                 model);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("(inputs at 16)"));
  export_and_check_forecast(model, bars, "wide", kFloatTolerance);
}

TEST_F(OnnxExportCli, BadInputIsRefusedAndNothingIsWritten) {
  const std::string fp32 = kGolden + "defaults_3f2c661_fp32.safetensors";
  // Not a model file: one line naming it.
  const std::string junk = dir_->write("junk.safetensors", "not a model");
  auto run = run_qtft(*dir_, "export-onnx --load-model " + junk + " --output " + dir_->file("junk.onnx"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(junk));
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  EXPECT_FALSE(std::filesystem::exists(dir_->file("junk.onnx")));
  // An output in a folder that does not exist.
  const std::string nowhere = dir_->file("no-such-folder/model.onnx");
  run = run_qtft(*dir_, "export-onnx --load-model " + fp32 + " --output " + nowhere);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("no-such-folder does not exist"));
  EXPECT_FALSE(std::filesystem::exists(dir_->file("no-such-folder")));
  // An output that is a folder.
  run = run_qtft(*dir_, "export-onnx --load-model " + fp32 + " --output " + dir_->path().string());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("is a folder; give the graph's file name"));
  // --int8 on an FP32 model: a usage error naming the ways to quantize it.
  run = run_qtft(*dir_, "export-onnx --int8 --load-model " + fp32 + " --output " + dir_->file("fp32.onnx"));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--use-qat"));
  EXPECT_THAT(run.err, HasSubstr("qtft quantize"));
  EXPECT_FALSE(std::filesystem::exists(dir_->file("fp32.onnx")));
  // An int8 file one of whose observers never saw data: its scale is a placeholder.
  const std::string int8 = dir_->file("golden.int8.safetensors"), stale = dir_->file("stale.int8.safetensors");
  ASSERT_EQ(run_qtft(*dir_, "export-int8 --load-model " + kGolden + "defaults_3f2c661_qat.safetensors --output " + int8)
                .exit_code,
            0);
  io::TensorFile file = io::load_tensor_file(int8);
  int zeroed = 0;
  for (auto& [name, tensor] : file.tensors) {
    if (name.ends_with("quantile_outputs.output_layer.output_quant.samples")) {
      tensor = at::zeros_like(tensor);
      ++zeroed;
    }
  }
  ASSERT_EQ(zeroed, 1);
  io::save_tensor_file(stale, file);
  run = run_qtft(*dir_, "export-onnx --load-model " + stale + " --output " + dir_->file("stale.onnx"));
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("observers never saw data (quantile_outputs.output_layer)"));
  EXPECT_FALSE(std::filesystem::exists(dir_->file("stale.onnx")));
}

}  // namespace
}  // namespace qtft
