// The installed package as a trading system uses it: install qtft into a fresh prefix,
// build examples/forecast_latest out of tree against it with find_package(qtft), run it
// on a model and recent bars, and require the very output of `qtft forecast`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "support/bar_files.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

using ::testing::HasSubstr;

// Runs a shell command with its output in `log`; returns the exit code.
int shell(const std::string& command, const std::string& log) {
  int status = std::system((command + " >'" + log + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Package, AnOutOfTreeProgramBuildsAgainstTheInstalledPackageAndForecastsLikeTheCli) {
  test::TempDir dir;
  const std::string cmake = QTFT_CMAKE_COMMAND, prefix = dir.file("prefix"), log = dir.file("log.txt");
  ASSERT_EQ(shell("'" + cmake + "' --install '" QTFT_BUILD_DIR "' --prefix '" + prefix + "'", log), 0)
      << test::read_text(log);
  EXPECT_TRUE(std::filesystem::exists(prefix + "/lib/cmake/qtft/qtftConfig.cmake"));
  EXPECT_TRUE(std::filesystem::exists(prefix + "/include/qtft/infer/forecaster.h"));
  // Only the public headers: no area's detail/ is installed.
  EXPECT_TRUE(std::filesystem::exists(QTFT_SOURCE_DIR "/include/qtft/memory/detail/recompute_context.h"));
  EXPECT_FALSE(std::filesystem::exists(prefix + "/include/qtft/memory/detail"));
  EXPECT_FALSE(std::filesystem::exists(prefix + "/include/qtft/memory/detail/recompute_context.h"));
  // qtft/version.h, the package's version file and the CLI say one version.
  std::smatch header_version, package_version;
  const auto header = test::read_text(prefix + "/include/qtft/version.h");
  const auto package = test::read_text(prefix + "/lib/cmake/qtft/qtftConfigVersion.cmake");
  ASSERT_TRUE(std::regex_search(header, header_version, std::regex("#define QTFT_VERSION_STRING \"([0-9.]+)\"")));
  ASSERT_TRUE(std::regex_search(package, package_version, std::regex("set\\(PACKAGE_VERSION \"([0-9.]+)\"\\)")));
  EXPECT_EQ(header_version[1].str(), package_version[1].str());
  EXPECT_EQ(test::run_qtft(dir, "--version").out, "qtft " + header_version[1].str() + "\n");

  const std::string build = dir.file("example-build");
  ASSERT_EQ(shell("'" + cmake + "' -S '" QTFT_SOURCE_DIR "/examples/forecast_latest' -B '" + build +
                      "' -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH='" + prefix + "'",
                  log),
            0)
      << test::read_text(log);
  ASSERT_EQ(shell("'" + cmake + "' --build '" + build + "'", log), 0) << test::read_text(log);

  // A model trained by the installed CLI, and the latest bars of the same series under
  // another file name.
  dir.write("bars.csv", test::regular_bars_csv(400, "ES"));
  dir.write("recent.csv", test::regular_bars_csv(60, "ES"));
  auto train = test::run_qtft(dir, "train --csv-file '" + dir.file("bars.csv") +
                                       "' --encoder-length 12 --horizon 3 --epochs 1 --max-batches-per-epoch 2 "
                                       "--hidden-size 8 --attention-heads 2 --save-model '" +
                                       dir.file("model.safetensors") + "'");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  auto cli = test::run_qtft(
      dir, "forecast --load-model '" + dir.file("model.safetensors") + "' --csv-file '" + dir.file("recent.csv") + "'");
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  ASSERT_EQ(
      shell("'" + build + "/forecast_latest' '" + dir.file("model.safetensors") + "' '" + dir.file("recent.csv") + "'",
            log),
      0)
      << test::read_text(log);
  EXPECT_EQ(test::read_text(log), cli.out);
  EXPECT_THAT(cli.out, HasSubstr("ES: 3 bars after"));

  // The same program on an int8 export (PTQ at 7-bit activations, so that its integer
  // products run), with the same calls.
  const std::string ptq = dir.file("ptq.safetensors"), int8 = dir.file("model.int8.safetensors");
  auto quantize = test::run_qtft(dir, "quantize --load-model '" + dir.file("model.safetensors") + "' --csv-file '" +
                                          dir.file("bars.csv") +
                                          "' --calibration-batches 2 --activation-bits 7 "
                                          "--save-model '" +
                                          ptq + "'");
  ASSERT_EQ(quantize.exit_code, 0) << quantize.err;
  auto exported = test::run_qtft(dir, "export-int8 --load-model '" + ptq + "' --output '" + int8 + "'");
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  auto int8_cli =
      test::run_qtft(dir, "forecast --load-model '" + int8 + "' --csv-file '" + dir.file("recent.csv") + "'");
  ASSERT_EQ(int8_cli.exit_code, 0) << int8_cli.err;
  EXPECT_THAT(int8_cli.err, HasSubstr("integer products: "));
  ASSERT_EQ(shell("'" + build + "/forecast_latest' '" + int8 + "' '" + dir.file("recent.csv") + "'", log), 0)
      << test::read_text(log);
  EXPECT_EQ(test::read_text(log), int8_cli.out);
  EXPECT_THAT(int8_cli.out, HasSubstr("ES: 3 bars after"));
  // A window with too few bars is the same clear error for an int8 model.
  dir.write("short.csv", test::regular_bars_csv(5, "ES"));
  auto short_window =
      test::run_qtft(dir, "forecast --load-model '" + int8 + "' --csv-file '" + dir.file("short.csv") + "'");
  EXPECT_EQ(short_window.exit_code, 1);
  EXPECT_THAT(short_window.err, HasSubstr("5 bars given, the model needs at least 13"));
}

}  // namespace
}  // namespace qtft
