#include "qtft/io/atomic_file.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "qtft/common/error.h"
#include "support/temp_dir.h"

namespace qtft::io {
namespace {

using test::TempDir;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every name in the folder, so a test sees a leftover temporary whatever it is called.
std::vector<std::string> names_in(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& item : std::filesystem::directory_iterator(folder)) {
    names.push_back(item.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(AtomicFile, WriteFileAtomicallyWritesExactBytesAndNoTemporary) {
  TempDir dir;
  // Binary content with a NUL and a CR/LF: nothing may be translated or cut short.
  const std::string content(
      "head\0\r\nmid\xff"
      "tail",
      14);
  auto path = dir.path() / "out.bin";
  write_file_atomically(path, content);
  EXPECT_EQ(slurp(path), content);
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(AtomicFile, WriteFileAtomicallyWritesAnEmptyFile) {
  TempDir dir;
  auto path = dir.path() / "empty";
  write_file_atomically(path, "");
  ASSERT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(std::filesystem::file_size(path), 0u);
}

TEST(AtomicFile, TemporaryLivesInTheSameFolderSoTheRenameStaysOnOneFileSystem) {
  TempDir dir;
  AtomicFile file(dir.path() / "x.safetensors");
  EXPECT_EQ(file.temp_path().parent_path(), dir.path());
  EXPECT_NE(file.temp_path(), file.final_path());
}

TEST(AtomicFile, TwoWritersToOnePathGetDifferentTemporaries) {
  TempDir dir;
  AtomicFile a(dir.path() / "x");
  AtomicFile b(dir.path() / "x");
  EXPECT_NE(a.temp_path(), b.temp_path());
}

TEST(AtomicFile, DestroyedWithoutCommitLeavesNoFileAtAll) {
  TempDir dir;
  auto path = dir.path() / "partial.bin";
  {
    AtomicFile file(path);
    std::ofstream(file.temp_path(), std::ios::binary) << "half written";
    ASSERT_TRUE(std::filesystem::exists(file.temp_path()));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(names_in(dir.path()).empty());
}

TEST(AtomicFile, ExistingFileIsReplacedOnlyAtCommit) {
  TempDir dir;
  auto path = dir.path() / "model.safetensors";
  write_file_atomically(path, "old");
  AtomicFile file(path);
  std::ofstream(file.temp_path(), std::ios::binary) << "new content";
  // Before commit a reader still sees the complete old file, never a mix.
  EXPECT_EQ(slurp(path), "old");
  file.commit();
  EXPECT_EQ(slurp(path), "new content");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"model.safetensors"});
}

TEST(AtomicFile, ExistingFileSurvivesAnAbandonedWrite) {
  TempDir dir;
  auto path = dir.path() / "model.safetensors";
  write_file_atomically(path, "old");
  {
    AtomicFile file(path);
    std::ofstream(file.temp_path(), std::ios::binary) << "never committed";
  }
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"model.safetensors"});
}

TEST(AtomicFile, CommitWithoutATemporaryThrowsNamingThePath) {
  TempDir dir;
  auto path = dir.path() / "never.bin";
  AtomicFile file(path);
  try {
    file.commit();
    FAIL() << "commit of a temporary that was never written should throw";
  } catch (const qtft::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(AtomicFile, WritingIntoAMissingFolderThrowsNamingThePath) {
  TempDir dir;
  auto path = dir.path() / "no_such_folder" / "out.bin";
  try {
    write_file_atomically(path, "x");
    FAIL() << "writing into a missing folder should throw";
  } catch (const qtft::Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "no_such_folder"));
}

TEST(AtomicFile, TheNextWriteRemovesTemporariesOfWritersThatAreGone) {
  TempDir dir;
  // A pid that no longer runs: a child that has exited and been reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const auto stale = dir.write(".m.safetensors.tmp-" + std::to_string(child) + "-0", "left by kill -9");
  const auto live = dir.write(".m.safetensors.tmp-" + std::to_string(::getpid()) + "-999", "being written");
  const auto other = dir.write(".other.safetensors.tmp-" + std::to_string(child) + "-0", "another target's");
  write_file_atomically(dir.file("m.safetensors"), "model");
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));   // its writer still runs
  EXPECT_TRUE(std::filesystem::exists(other));  // not this target's
  EXPECT_EQ(slurp(dir.file("m.safetensors")), "model");
}

TEST(CheckWritable, RefusesWhatCannotBeWrittenBeforeAnyWork) {
  TempDir dir;
  EXPECT_NO_THROW(check_writable(dir.file("new.safetensors"), "--save-model"));
  auto message = [](const std::filesystem::path& p) {
    return test::error_message([&] { check_writable(p, "--save-model"); });
  };
  EXPECT_NE(message(dir.file("no/such/dir/m.safetensors")).find("the folder"), std::string::npos);
  EXPECT_NE(message(dir.path()).find("is a folder"), std::string::npos);
  if (::geteuid() != 0) {  // root writes anywhere; the read-only case needs a plain user
    std::filesystem::create_directory(dir.file("ro"));
    ::chmod(dir.file("ro").c_str(), 0555);
    EXPECT_NE(message(dir.file("ro/m.safetensors")).find("Permission denied"), std::string::npos);
  }
  EXPECT_THROW(check_writable(dir.file("no/such/dir/m.safetensors"), "--save-model"), UsageError);
}

TEST(OutputLock, ASecondWriterOfTheSamePathIsRefusedUntilTheFirstIsDone) {
  TempDir dir;
  const auto target = dir.file("m.safetensors");
  {
    OutputLock first(target);
    const auto message = test::error_message([&] { OutputLock second(target); });
    EXPECT_NE(message.find("another qtft run is writing this file"), std::string::npos) << message;
    EXPECT_NE(message.find(target), std::string::npos);
    OutputLock elsewhere(dir.file("other.safetensors"));  // other paths are independent
  }
  EXPECT_NO_THROW(OutputLock again(target));
  EXPECT_EQ(names_in(dir.path()).size(), 0u) << "the lock file is removed when released";
}

}  // namespace
}  // namespace qtft::io
