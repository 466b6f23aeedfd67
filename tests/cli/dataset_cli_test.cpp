// A desk's history as a folder: make-data writes a partitioned dataset, prepare builds its
// feature store, and train, evaluate, predict and forecast read it; training from the store
// is bitwise training in memory; a full disk leaves no store behind; ranks share one store.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft {
namespace {

namespace fs = std::filesystem;
using test::run_qtft;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kModel = " --hidden-size 8 --attention-heads 2 --encoder-length 16 --horizon 4";
const std::string kShort = " --epochs 1 --max-batches-per-epoch 3 --batch-size 16 --seed 5";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Every file below `folder` whose name contains `part`.
size_t files_named(const std::string& folder, const std::string& part) {
  size_t n = 0;
  if (!fs::exists(folder)) return 0;
  for (const auto& e : fs::recursive_directory_iterator(folder)) {
    n += e.is_regular_file() && e.path().filename().string().find(part) != std::string::npos;
  }
  return n;
}

class DatasetCli : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_.file("history") + "/";
    auto made = run_qtft(dir_, "make-data --output " + data_ + " --rows 6000 --symbols 3 --bar-minutes 60");
    ASSERT_EQ(made.exit_code, 0) << made.err;
    EXPECT_THAT(made.out, HasSubstr("6000 bars, 3 symbols in"));
    EXPECT_TRUE(fs::exists(data_ + "symbol=ES"));
  }
  test::TempDir dir_;
  std::string data_;
};

TEST_F(DatasetCli, TrainingFromTheStoreIsBitwiseTrainingInMemory) {
  const auto stored = dir_.file("stored.safetensors"), in_memory = dir_.file("memory.safetensors");
  auto a = run_qtft(dir_, "train --data " + data_ + kModel + kShort + " --save-model " + stored);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_THAT(a.err, HasSubstr("Feature store: " + data_ + "_qtft_store/"));
  EXPECT_THAT(a.err, HasSubstr("built: no store yet; 6000 bars, 3 series"));
  EXPECT_THAT(a.out, HasSubstr("rows: 6000 bars, 3 symbols (CL: 2000, ES: 2000, NQ: 2000)"));
  auto b = run_qtft(
      dir_, "train --parquet-file " + data_ + " --no-feature-store" + kModel + kShort + " --save-model " + in_memory);
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_THAT(b.err, Not(HasSubstr("Feature store")));
  auto diff = run_qtft(dir_, "diff " + stored + " " + in_memory);
  EXPECT_EQ(diff.exit_code, 0) << diff.out << diff.err;

  // Evaluate and predict with that model read the same store; forecast reads the latest bars.
  auto evaluated = run_qtft(dir_, "evaluate --load-model " + stored + " --data " + data_);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.err;
  EXPECT_THAT(evaluated.err, HasSubstr("reused: built from these files with these options"));
  auto predicted =
      run_qtft(dir_, "predict --load-model " + stored + " --data " + data_ + " --output " + dir_.file("p.csv"));
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  EXPECT_THAT(predicted.err, HasSubstr("reused"));
  EXPECT_EQ(files_named(data_ + "_qtft_store", ".qtfs"), 1u);
  auto forecast = run_qtft(dir_, "forecast --load-model " + stored + " --data " + data_ + " --json");
  ASSERT_EQ(forecast.exit_code, 0) << forecast.err;
  EXPECT_EQ(count(forecast.out, "\"symbol\""), 3u);
}

TEST_F(DatasetCli, PrepareBuildsOnceAndNamesWhatChanged) {
  auto first = run_qtft(dir_, "prepare --data " + data_ + " --encoder-length 16 --horizon 4");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.err, HasSubstr("built: no store yet"));
  EXPECT_THAT(first.out, HasSubstr("windows (encoder 16, horizon 4)"));
  auto second = run_qtft(dir_, "prepare --data " + data_ + " --encoder-length 16 --horizon 4");
  EXPECT_THAT(second.err, HasSubstr("reused"));
  auto more = run_qtft(dir_, "make-data --output " + data_ + " --rows 8000 --symbols 4 --bar-minutes 60");
  ASSERT_EQ(more.exit_code, 0) << more.err;
  auto third = run_qtft(dir_, "prepare --data " + data_ + " --encoder-length 16 --horizon 4");
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_THAT(third.err, HasSubstr("the source's files changed since"));
  EXPECT_THAT(third.err, HasSubstr("8000 bars, 4 series"));
}

TEST_F(DatasetCli, AFullDiskFailsCleanlyAndLeavesNoStore) {
  // A 256 KiB file size limit stands in for a full disk: the store's writes fail part way.
  const auto store = dir_.file("store");
  auto run = run_qtft(dir_, "prepare --data " + data_ + " --feature-store " + store, "ulimit -f 256;");
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("cannot write the feature store: File too large"));
  EXPECT_EQ(files_named(store, "qtfs"), 0u) << "no store and no temporary left";
  auto retry = run_qtft(dir_, "prepare --data " + data_ + " --feature-store " + store);
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_EQ(files_named(store, "qtfs"), 1u);
}

TEST_F(DatasetCli, AReadOnlyFolderKeepsItsStoreInTheUsersCache) {
  const auto cache = dir_.file("cache");
  const std::string folder = data_.substr(0, data_.size() - 1);
  std::string prefix = "XDG_CACHE_HOME=" + cache;
  if (::geteuid() == 0) {
    // Root writes through permission bits: the folder is bind-mounted read-only in a mount
    // namespace of the command's own.
    if (std::system("unshare -m true 2>/dev/null") != 0)
      GTEST_SKIP() << "no mount namespace to make a folder read-only";
    prefix = "unshare -m sh -c 'mount --bind " + folder + " " + folder + " && mount -o remount,bind,ro " + folder +
             " && exec env XDG_CACHE_HOME=" + cache + " \"$0\" \"$@\"'";
  } else {
    fs::permissions(folder, fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write,
                    fs::perm_options::remove);
  }
  auto run = run_qtft(dir_, "prepare --data " + data_, prefix);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("Feature store: " + cache + "/qtft/stores/history-"));
  EXPECT_THAT(run.err, HasSubstr("built: no store yet; " + data_ +
                                 " is not writable, so its feature store is in the user's cache"));
  EXPECT_FALSE(fs::exists(data_ + "_qtft_store"));
  run = run_qtft(dir_, "prepare --data " + data_, prefix);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("reused: built from these files with these options; " + data_ + " is not writable"));
  if (::geteuid() != 0) fs::permissions(folder, fs::perms::owner_write, fs::perm_options::add);
}

TEST_F(DatasetCli, RanksOfOneMachineShareTheStoreRankZeroBuilds) {
  auto run = run_qtft(dir_, "train --data " + data_ + kModel + kShort + " --nproc 2 --dropout 0");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(count(run.err, "Feature store:"), 1u) << run.err;  // rank 0 reports; rank 1 maps it
  EXPECT_EQ(files_named(data_ + "_qtft_store", ".qtfs"), 1u);
}

}  // namespace
}  // namespace qtft
