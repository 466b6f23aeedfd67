// Comparing safetensors files: the library's verdict per tensor, and `qtft diff` exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>

#include <cmath>

#include "qtft/io/tensor_diff.h"
#include "qtft/io/tensor_file.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace qtft::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

TensorFile sample() {
  TensorFile f;
  f.tensors.emplace_back("weight", at::arange(6, at::kFloat).reshape({2, 3}));
  f.tensors.emplace_back("steps", at::tensor({3, 7}, at::kLong));
  f.tensors.emplace_back("mask", at::tensor({1, 0, 1}, at::kInt).to(at::kBool));
  f.metadata = {{"config", "{\"hidden\": 8}"}, {"note", "first"}};
  return f;
}

// A deep copy: files compared in memory must not share storage with the original.
TensorFile clone(const TensorFile& f) {
  TensorFile out = f;
  for (auto& [name, t] : out.tensors) t = t.clone();
  return out;
}

at::Tensor& tensor(TensorFile& f, const std::string& name) {
  for (auto& [n, t] : f.tensors) {
    if (n == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

TEST(TensorDiff, IdenticalFilesAreIdentical) {
  test::TempDir dir;
  save_tensor_file(dir.file("a.safetensors"), sample());
  save_tensor_file(dir.file("b.safetensors"), sample());
  auto diff = diff_tensor_files(dir.file("a.safetensors"), dir.file("b.safetensors"));
  EXPECT_TRUE(diff.identical());
  ASSERT_EQ(diff.rows.size(), 3u);
  for (const auto& row : diff.rows) {
    EXPECT_TRUE(row.bitwise_identical) << row.name;
    EXPECT_TRUE(row.in_a && row.in_b && row.same_dtype && row.same_shape) << row.name;
    EXPECT_EQ(row.max_abs_diff, 0.0) << row.name;
    EXPECT_EQ(row.differing_elements, 0) << row.name;
  }
  EXPECT_EQ(diff.rows[0].dtype_a, "F32");
  EXPECT_EQ(diff.rows[0].shape_a, (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(diff.metadata_differences.empty());
}

TEST(TensorDiff, OneChangedElementGivesExactMaxDiff) {
  auto a = sample(), b = clone(a);
  tensor(b, "weight").view({-1})[4] = 4.25f;  // was 4: a difference of exactly 0.25
  tensor(b, "steps").view({-1})[1] = -5;      // was 7: exactly 12
  auto diff = diff_tensor_files(a, b);
  EXPECT_FALSE(diff.identical());
  EXPECT_EQ(diff.differing_tensors(), 2u);
  const auto& w = diff.rows[0];
  EXPECT_FALSE(w.bitwise_identical);
  EXPECT_TRUE(w.same_dtype && w.same_shape);
  EXPECT_EQ(w.max_abs_diff, 0.25);
  EXPECT_EQ(w.differing_elements, 1);
  EXPECT_EQ(w.max_diff_index, 4);
  EXPECT_EQ(diff.rows[1].max_abs_diff, 12.0);
  EXPECT_TRUE(diff.rows[2].bitwise_identical);
}

TEST(TensorDiff, IntegerDifferencesAreExactBeyondDoublePrecision) {
  auto a = sample(), b = clone(a);
  tensor(a, "steps").view({-1})[0] = int64_t{1} << 62;
  tensor(b, "steps").view({-1})[0] = -(int64_t{1} << 62);
  auto diff = diff_tensor_files(a, b);
  EXPECT_EQ(diff.rows[1].max_abs_diff, std::ldexp(1.0, 63));  // no overflow
}

TEST(TensorDiff, BytesDecideIdentityNotValues) {
  // -0.0 equals 0.0 as a value, but the files are not bitwise identical.
  auto a = sample(), b = clone(a);
  tensor(b, "weight").view({-1})[0] = -0.0f;
  auto diff = diff_tensor_files(a, b);
  EXPECT_FALSE(diff.identical());
  EXPECT_EQ(diff.rows[0].max_abs_diff, 0.0);
  EXPECT_FALSE(diff.rows[0].bitwise_identical);
}

TEST(TensorDiff, NaNAgainstNumberIsInfinitelyFar) {
  auto a = sample(), b = clone(a);
  tensor(a, "weight").view({-1})[1] = NAN;
  tensor(b, "weight").view({-1})[1] = NAN;
  EXPECT_TRUE(diff_tensor_files(a, b).identical());
  tensor(b, "weight").view({-1})[2] = NAN;
  EXPECT_TRUE(std::isinf(diff_tensor_files(a, b).rows[0].max_abs_diff));
}

TEST(TensorDiff, MissingTensors) {
  auto a = sample(), b = clone(a);
  b.tensors.erase(b.tensors.begin() + 1);  // no "steps" in B
  b.tensors.emplace_back("extra", at::tensor({1.0f}));
  auto diff = diff_tensor_files(a, b);
  EXPECT_FALSE(diff.identical());
  EXPECT_THAT(diff.only_in_a, ElementsAre("steps"));
  EXPECT_THAT(diff.only_in_b, ElementsAre("extra"));
  ASSERT_EQ(diff.rows.size(), 4u);
  EXPECT_EQ(diff.rows[1].name, "steps");
  EXPECT_TRUE(diff.rows[1].in_a);
  EXPECT_FALSE(diff.rows[1].in_b);
  EXPECT_TRUE(std::isnan(diff.rows[1].max_abs_diff));
  EXPECT_EQ(diff.rows[3].name, "extra");
  EXPECT_FALSE(diff.rows[3].in_a);
  EXPECT_EQ(diff.differing_tensors(), 2u);
}

TEST(TensorDiff, DtypeMismatchComparesValuesButIsNotIdentical) {
  auto a = sample(), b = clone(a);
  tensor(b, "weight") = tensor(b, "weight").to(at::kDouble);
  auto diff = diff_tensor_files(a, b);
  EXPECT_FALSE(diff.identical());
  const auto& w = diff.rows[0];
  EXPECT_FALSE(w.same_dtype);
  EXPECT_TRUE(w.same_shape);
  EXPECT_EQ(w.dtype_a, "F32");
  EXPECT_EQ(w.dtype_b, "F64");
  EXPECT_EQ(w.max_abs_diff, 0.0);  // float32 converts to double exactly
  EXPECT_FALSE(w.bitwise_identical);
}

TEST(TensorDiff, ShapeMismatchIsNotComparable) {
  auto a = sample(), b = clone(a);
  tensor(b, "weight") = tensor(b, "weight").reshape({3, 2});
  auto w = diff_tensor_files(a, b).rows[0];
  EXPECT_TRUE(w.same_dtype);
  EXPECT_FALSE(w.same_shape);
  EXPECT_TRUE(std::isnan(w.max_abs_diff));
  EXPECT_EQ(w.differing_elements, -1);
  EXPECT_FALSE(w.bitwise_identical);
}

TEST(TensorDiff, MetadataDifferencesAreReportedButDoNotBreakIdentity) {
  auto a = sample(), b = clone(a);
  b.metadata["note"] = "second";
  b.metadata.erase("config");
  b.metadata["created"] = "today";
  auto diff = diff_tensor_files(a, b);
  EXPECT_TRUE(diff.identical());
  EXPECT_THAT(diff.metadata_differences, ElementsAre("config", "created", "note"));
}

TEST(TensorDiff, UnreadableFileNamesIt) {
  test::TempDir dir;
  save_tensor_file(dir.file("a.safetensors"), sample());
  auto bad = dir.write("bad.safetensors", "not a safetensors file");
  EXPECT_THAT(test::error_message([&] { diff_tensor_files(dir.file("a.safetensors"), bad); }),
              HasSubstr("bad.safetensors"));
}

// `qtft diff` as scripts use it: the exit code is the verdict.
test::CliRun qtft(const test::TempDir& dir, const std::string& args) { return test::run_qtft(dir, args); }

TEST(DiffCommand, ExitsZeroWhenIdenticalAndOneWhenNot) {
  test::TempDir dir;
  auto a = dir.file("a.safetensors"), b = dir.file("b.safetensors"), c = dir.file("c.safetensors");
  save_tensor_file(a, sample());
  save_tensor_file(b, sample());
  auto changed = clone(sample());
  tensor(changed, "weight").view({-1})[4] = 4.25f;
  changed.metadata["note"] = "second";
  save_tensor_file(c, changed);

  auto same = qtft(dir, "diff " + a + " " + b);
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_THAT(same.out, HasSubstr("all 3 tensors bitwise identical"));
  EXPECT_EQ(same.err, "");

  auto verbose = qtft(dir, "diff --verbose " + a + " " + b);
  EXPECT_EQ(verbose.exit_code, 0);
  EXPECT_THAT(verbose.out, HasSubstr("steps"));  // every tensor is listed
  EXPECT_THAT(verbose.out, HasSubstr("identical"));

  auto differ = qtft(dir, "diff " + a + " " + c);
  EXPECT_EQ(differ.exit_code, 1);
  EXPECT_EQ(differ.err, "");  // a difference is a verdict, not an error
  EXPECT_THAT(differ.out, HasSubstr("1 of 3 tensors differ"));
  EXPECT_THAT(differ.out, HasSubstr("DIFFERENT"));
  EXPECT_THAT(differ.out, HasSubstr("0.25"));
  EXPECT_THAT(differ.out, HasSubstr("metadata: 1 key differs (reported only"));
  EXPECT_THAT(differ.out, Not(HasSubstr("steps")));  // identical tensors only with --verbose
}

TEST(DiffCommand, MissingFileIsAUsageErrorAndBadFileAnError) {
  test::TempDir dir;
  auto a = dir.file("a.safetensors");
  save_tensor_file(a, sample());
  EXPECT_EQ(qtft(dir, "diff " + a + " " + dir.file("nope.safetensors")).exit_code, 2);
  auto bad = dir.write("bad.safetensors", "garbage");
  auto run = qtft(dir, "diff " + a + " " + bad);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("bad.safetensors"));
}

}  // namespace
}  // namespace qtft::io
