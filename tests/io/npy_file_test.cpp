// The .npy writer: NumPy's format 1.0 header, byte for byte, then the values. numpy itself
// reads these files in the ONNX export's checks (tests/cli/onnx_export_cli_test.cpp).
#include "qtft/io/npy_file.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "qtft/common/error.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft::io {
namespace {

std::string npy_header(const std::string& dict) {
  // Magic, version 1.0, the header's length (little-endian), the dict padded with spaces
  // and a newline so that the values start at byte 128 (64-byte aligned).
  std::string header = dict;
  header.append(128 - 10 - dict.size() - 1, ' ');
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size());
  bytes += '\0';
  return bytes + header;
}

TEST(NpyFile, WritesNumpysHeaderThenTheValuesInCOrder) {
  test::TempDir dir;
  const auto path = dir.path() / "a.npy";
  save_npy(path, at::arange(6, at::kLong).reshape({2, 3}).t());  // a strided view: written in C order
  const std::string bytes = test::read_text(path.string());
  const std::string header = npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 2), }");
  ASSERT_EQ(bytes.size(), header.size() + 6 * 8);
  EXPECT_EQ(bytes.substr(0, header.size()), header);
  int64_t values[6];
  std::memcpy(values, bytes.data() + header.size(), sizeof values);
  EXPECT_THAT(values, ::testing::ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(NpyFile, OneDimensionTakesATrailingCommaAndOtherTypesAreRefused) {
  test::TempDir dir;
  save_npy(dir.path() / "f.npy", at::tensor({1.5f, -2.0f}));
  const std::string bytes = test::read_text((dir.path() / "f.npy").string());
  EXPECT_EQ(bytes.substr(0, 128), npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"));
  EXPECT_THAT([&] { save_npy(dir.path() / "h.npy", at::tensor({1.0}).to(at::kHalf)); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("h.npy: cannot write a tensor of Half as .npy")));
}

}  // namespace
}  // namespace qtft::io
