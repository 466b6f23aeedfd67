// Tensors to safetensors and back: every dtype bit for bit, views, and metadata.
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "qtft/common/error.h"
#include "qtft/io/safetensors.h"
#include "qtft/io/tensor_file.h"
#include "support/temp_dir.h"

namespace qtft::io {
namespace {

TEST(TensorFile, RoundTripsEveryDtypeBitForBit) {
  test::TempDir dir;
  TensorFile file;
  auto base = at::randn({3, 5}, at::kDouble);
  for (auto type : {at::kDouble, at::kFloat, at::kHalf, at::kBFloat16, at::kLong, at::kInt, at::kShort, at::kChar,
                    at::kByte, at::kBool}) {
    file.tensors.emplace_back(std::string(c10::toString(type)), base.mul(10).to(type));
  }
  file.tensors.emplace_back("scalar", at::arange(1, at::kFloat).reshape({}));
  file.tensors.emplace_back("empty", at::arange(0, at::kFloat));
  file.metadata["config"] = R"({"hidden_size": 64})";
  save_tensor_file(dir.file("m.safetensors"), file);

  auto back = load_tensor_file(dir.file("m.safetensors"));
  ASSERT_EQ(back.tensors.size(), file.tensors.size());
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const auto& [name, original] = file.tensors[i];
    const auto& [back_name, loaded] = back.tensors[i];
    EXPECT_EQ(back_name, name);
    EXPECT_EQ(loaded.scalar_type(), original.scalar_type()) << name;
    EXPECT_EQ(loaded.sizes(), original.sizes()) << name;
    ASSERT_EQ(loaded.nbytes(), original.nbytes());
    EXPECT_EQ(std::memcmp(loaded.data_ptr(), original.data_ptr(), loaded.nbytes()), 0) << name;
  }
  EXPECT_EQ(back.metadata, file.metadata);
}

TEST(TensorFile, SavesViewsAsTheirLogicalContents) {
  test::TempDir dir;
  auto matrix = at::arange(12, at::kFloat).reshape({3, 4});
  TensorFile file;
  file.tensors.emplace_back("transposed", matrix.t());
  file.tensors.emplace_back("column", matrix.select(1, 2));
  save_tensor_file(dir.file("v.safetensors"), file);
  auto back = load_tensor_file(dir.file("v.safetensors"));
  EXPECT_TRUE(at::equal(*back.find("transposed"), matrix.t().contiguous()));
  EXPECT_TRUE(at::equal(*back.find("column"), matrix.select(1, 2).contiguous()));
  EXPECT_EQ(back.find("missing"), nullptr);
}

TEST(TensorFile, RejectsDtypesTheFormatLacks) {
  test::TempDir dir;
  TensorFile file;
  file.tensors.emplace_back("complex", at::randn({2}, at::kComplexFloat));
  EXPECT_THROW(save_tensor_file(dir.file("c.safetensors"), file), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("c.safetensors")));
}

}  // namespace
}  // namespace qtft::io
