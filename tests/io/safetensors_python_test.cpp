// Interoperability with the reference implementation: the Python `safetensors` package in
// the venv that scripts/setup.sh builds. Our own round trips cannot catch a misreading of the
// format that writer and reader share; these tests can.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>

#include "qtft/io/safetensors.h"
#include "support/temp_dir.h"

namespace qtft::io {
namespace {

using test::TempDir;

// The tensors of scripts/check_safetensors_interop.py (EXPECTED, METADATA) as hand-computed
// little-endian bytes; the two lists must change together.
struct ExpectedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

const std::vector<ExpectedTensor>& expected_tensors() {
  static const std::vector<ExpectedTensor> tensors = {
      // 1.5, -2.25, 0.0, -0.0, inf, 2^24
      {"f32", DType::F32, {2, 3}, {0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x10, 0xc0, 0x00, 0x00, 0x00, 0x00,
                                   0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x80, 0x7f, 0x00, 0x00, 0x80, 0x4b}},
      // 42.0
      {"f32_scalar", DType::F32, {}, {0x00, 0x00, 0x28, 0x42}},
      // 1.0, -2.0, 0.5, 65504 (the largest finite half)
      {"f16", DType::F16, {4}, {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0xff, 0x7b}},
      // 1.0, -2.0, 0.5, 3.140625
      {"bf16", DType::BF16, {2, 2}, {0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f, 0x49, 0x40}},
      // INT64_MIN, INT64_MAX, 0, -1
      {"i64", DType::I64, {4}, {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0xff, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0xff, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
      // -128, 127, 0, -1
      {"i8", DType::I8, {2, 2}, {0x80, 0x7f, 0x00, 0xff}},
      {"u8", DType::U8, {3}, {0x00, 0xff, 0x07}},
      {"bool", DType::BOOL, {3}, {0x01, 0x00, 0x01}},
  };
  return tensors;
}

const std::map<std::string, std::string> kExpectedMetadata = {
    {"format", "pt"}, {"source", "qtft"}, {"note", "Zürich ✓"}};

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Runs the interop script in `mode` on `file` and returns its exit code; its output lands
// in *output so a failing test can show what Python said.
int run_interop_script(const std::string& mode, const std::filesystem::path& file, const TempDir& dir,
                       std::string* output) {
  const std::filesystem::path script = std::filesystem::path(QTFT_SCRIPTS_DIR) / "check_safetensors_interop.py";
  const auto log = dir.path() / (mode + ".log");
  // Paths are quoted: a checkout under a folder with spaces must still work.
  const std::string command = "\"" + std::string(QTFT_TEST_PYTHON) + "\" \"" + script.string() + "\" " + mode + " \"" +
                              file.string() + "\" > \"" + log.string() + "\" 2>&1";
  int status = std::system(command.c_str());
  *output = slurp(log);
  if (status == -1 || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// A missing venv is a broken setup, not an optional feature: fail loudly with the fix.
::testing::AssertionResult python_is_installed() {
  const std::filesystem::path python(QTFT_TEST_PYTHON);
  if (!python.empty() && std::filesystem::exists(python)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the Python interpreter with safetensors, numpy and torch is missing at '"
                                       << QTFT_TEST_PYTHON << "'; run scripts/setup.sh to create the venv";
}

TEST(SafetensorsPython, ReferenceReaderLoadsWhatWeWriteBitForBit) {
  ASSERT_TRUE(python_is_installed());
  TempDir dir;
  std::vector<TensorBytes> tensors;
  for (const auto& t : expected_tensors()) {
    tensors.push_back({t.name, t.dtype, t.shape, std::as_bytes(std::span(t.bytes))});
  }
  const auto path = dir.path() / "from_qtft.safetensors";
  write_safetensors(path, tensors, kExpectedMetadata);

  std::string output;
  EXPECT_EQ(run_interop_script("verify", path, dir, &output), 0) << output;
}

TEST(SafetensorsPython, WeReadWhatTheReferenceWriterWritesBitForBit) {
  ASSERT_TRUE(python_is_installed());
  TempDir dir;
  const auto path = dir.path() / "from_python.safetensors";
  std::string output;
  ASSERT_EQ(run_interop_script("write", path, dir, &output), 0) << output;

  auto file = SafetensorsFile::read(path);
  EXPECT_EQ(file.metadata(), kExpectedMetadata);
  EXPECT_EQ(file.tensors().size(), expected_tensors().size());
  for (const auto& want : expected_tensors()) {
    const auto* got = file.find(want.name);
    ASSERT_NE(got, nullptr) << "no tensor '" << want.name << "' in " << path;
    EXPECT_EQ(got->dtype, want.dtype) << want.name;
    EXPECT_EQ(got->shape, want.shape) << want.name;
    auto bytes = file.bytes_of(*got);
    std::vector<uint8_t> got_bytes(bytes.size());
    std::memcpy(got_bytes.data(), bytes.data(), bytes.size());
    EXPECT_EQ(got_bytes, want.bytes) << want.name;
  }
}

}  // namespace
}  // namespace qtft::io
