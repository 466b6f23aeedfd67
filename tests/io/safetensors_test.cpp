#include "qtft/io/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "qtft/common/error.h"
#include "support/temp_dir.h"

namespace qtft::io {
namespace {

using test::error_message;
using test::TempDir;

std::vector<std::byte> to_bytes(std::string_view text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

std::string to_string(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A file as the reader sees it, built by hand so that a test can state any header, true or
// not: an 8-byte little-endian length (the real one unless `claimed_len` says otherwise),
// the header text, then the data buffer.
std::vector<std::byte> raw_file(std::string_view header, std::string_view data = {},
                                std::optional<uint64_t> claimed_len = std::nullopt) {
  uint64_t len = claimed_len.value_or(header.size());
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  out += header;
  out += data;
  return to_bytes(out);
}

std::string parse_error(std::string_view header, std::string_view data = {},
                        std::optional<uint64_t> claimed_len = std::nullopt) {
  return error_message([&] { SafetensorsFile::parse(raw_file(header, data, claimed_len), "<memory>"); });
}

// A distinct byte pattern per dtype, so a test would notice bytes landing in the wrong tensor.
std::vector<std::byte> pattern(size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((seed * 31 + i * 7 + 1) & 0xff);
  return out;
}

// ---- dtypes and the writer ----------------------------------------------------------------

TEST(SafetensorsDType, NamesAndSizesFollowTheFormat) {
  const std::vector<std::tuple<DType, std::string, size_t>> expected = {
      {DType::F64, "F64", 8}, {DType::F32, "F32", 4},  {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
      {DType::I64, "I64", 8}, {DType::I32, "I32", 4},  {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
      {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1}};
  for (const auto& [dtype, name, size] : expected) {
    EXPECT_EQ(dtype_name(dtype), name);
    EXPECT_EQ(dtype_size(dtype), size) << name;
    EXPECT_EQ(parse_dtype(name), dtype) << name;
  }
  // Spelling is case-sensitive in the format; a near miss is not a dtype.
  EXPECT_EQ(parse_dtype("f32"), std::nullopt);
  EXPECT_EQ(parse_dtype("F8_E4M3"), std::nullopt);
}

TEST(SafetensorsRoundTrip, EveryDTypeComesBackWithExactBytes) {
  TempDir dir;
  const std::vector<DType> dtypes = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                                     DType::I32, DType::I16, DType::I8,  DType::U8,   DType::BOOL};
  std::vector<std::vector<std::byte>> storage;
  std::vector<TensorBytes> tensors;
  for (size_t i = 0; i < dtypes.size(); ++i) {
    storage.push_back(pattern(2 * 3 * dtype_size(dtypes[i]), static_cast<int>(i)));
  }
  for (size_t i = 0; i < dtypes.size(); ++i) {
    tensors.push_back({"t_" + std::string(dtype_name(dtypes[i])), dtypes[i], {2, 3}, storage[i]});
  }
  auto path = dir.file("all.safetensors");
  write_safetensors(path, tensors, {});

  auto file = SafetensorsFile::read(path);
  ASSERT_EQ(file.tensors().size(), dtypes.size());
  for (size_t i = 0; i < dtypes.size(); ++i) {
    const auto& entry = file.at(tensors[i].name);
    EXPECT_EQ(entry.dtype, dtypes[i]) << entry.name;
    EXPECT_EQ(entry.shape, (std::vector<int64_t>{2, 3})) << entry.name;
    EXPECT_EQ(entry.numel(), 6u) << entry.name;
    auto bytes = file.bytes_of(entry);
    EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), storage[i].begin(), storage[i].end())) << entry.name;
  }
  EXPECT_TRUE(file.metadata().empty());
}

TEST(SafetensorsRoundTrip, MetadataComesBackUnchanged) {
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"}, {"empty", ""}, {"quote\"and\\slash", "line\nbreak"}, {"unicode", "Zürich ✓"}};
  auto bytes = serialize_safetensors({}, metadata);
  auto file = SafetensorsFile::parse(bytes, "<memory>");
  EXPECT_EQ(file.metadata(), metadata);
  EXPECT_TRUE(file.tensors().empty());
}

TEST(SafetensorsWriter, HeaderIsExactAndPaddedToEightBytes) {
  const std::vector<std::byte> data = {std::byte{1}, std::byte{2}};
  auto out = serialize_safetensors({{"a", DType::U8, {2}, data}}, {});
  // 53 bytes of JSON, padded with 3 spaces to 56 = 0x38.
  const std::string header = R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})"
                             "   ";
  std::string expected("\x38\0\0\0\0\0\0\0", 8);
  expected += header;
  expected += "\x01\x02";
  EXPECT_EQ(to_string(out), expected);
}

TEST(SafetensorsWriter, KeepsTheGivenTensorOrderWithMetadataFirst) {
  const std::vector<std::byte> b = {std::byte{0x34}, std::byte{0x12}};
  const std::vector<std::byte> a = {std::byte{0xff}};
  // "b" before "a": the writer must not sort by name, the data buffer follows the caller.
  auto out = serialize_safetensors({{"b", DType::I16, {1}, b}, {"a", DType::U8, {}, a}}, {{"k", "v"}});
  // 130 bytes of JSON, padded with 6 spaces to 136 = 0x88.
  const std::string header = R"({"__metadata__":{"k":"v"},)"
                             R"("b":{"dtype":"I16","shape":[1],"data_offsets":[0,2]},)"
                             R"("a":{"dtype":"U8","shape":[],"data_offsets":[2,3]}})"
                             "      ";
  std::string expected("\x88\0\0\0\0\0\0\0", 8);
  expected += header;
  expected += "\x34\x12\xff";
  EXPECT_EQ(to_string(out), expected);

  auto file = SafetensorsFile::parse(out, "<memory>");
  ASSERT_EQ(file.tensors().size(), 2u);
  EXPECT_EQ(file.tensors()[0].name, "b");  // data-buffer order, not name order
  EXPECT_EQ(file.tensors()[1].name, "a");
}

TEST(SafetensorsRoundTrip, ScalarHasEmptyShapeAndOneElement) {
  double value = -1.25;
  std::vector<std::byte> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  auto file = SafetensorsFile::parse(serialize_safetensors({{"s", DType::F64, {}, bytes}}, {}), "<memory>");
  const auto& s = file.at("s");
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.numel(), 1u);
  double back = 0;
  ASSERT_EQ(file.bytes_of(s).size(), sizeof back);
  std::memcpy(&back, file.bytes_of(s).data(), sizeof back);
  EXPECT_EQ(back, value);
}

TEST(SafetensorsRoundTrip, ZeroSizeTensorsSitBetweenOthers) {
  const std::vector<std::byte> a = {std::byte{7}};
  const std::vector<std::byte> c = {std::byte{9}, std::byte{10}};
  auto out = serialize_safetensors({{"a", DType::U8, {1}, a},
                                    {"empty", DType::F32, {0}, {}},
                                    {"empty_2d", DType::I64, {3, 0}, {}},
                                    {"c", DType::I8, {2}, c}},
                                   {});
  auto file = SafetensorsFile::parse(out, "<memory>");
  ASSERT_EQ(file.tensors().size(), 4u);
  const auto& empty = file.at("empty");
  EXPECT_EQ(empty.numel(), 0u);
  EXPECT_EQ(empty.begin, 1u);
  EXPECT_EQ(empty.end, 1u);
  EXPECT_TRUE(file.bytes_of(empty).empty());
  EXPECT_EQ(file.at("empty_2d").shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(to_string(file.bytes_of(file.at("c"))), "\x09\x0a");
}

TEST(SafetensorsWriter, RejectsDuplicateNames) {
  const std::vector<std::byte> one = {std::byte{1}};
  auto message = error_message([&] {
    serialize_safetensors({{"w", DType::U8, {1}, one}, {"w", DType::U8, {1}, one}}, {});
  });
  EXPECT_NE(message.find("two tensors named 'w'"), std::string::npos) << message;
}

TEST(SafetensorsWriter, RejectsATensorNamedLikeTheMetadataKey) {
  const std::vector<std::byte> one = {std::byte{1}};
  auto message = error_message([&] { serialize_safetensors({{"__metadata__", DType::U8, {1}, one}}, {}); });
  EXPECT_NE(message.find("'__metadata__'"), std::string::npos) << message;
}

TEST(SafetensorsWriter, RejectsBytesThatDoNotMatchShapeAndDType) {
  const std::vector<std::byte> three(3);
  auto message = error_message([&] { serialize_safetensors({{"w", DType::F32, {1}, three}}, {}); });
  EXPECT_NE(message.find("tensor 'w' has 3 bytes, its shape and dtype need 4"), std::string::npos) << message;
}

TEST(SafetensorsWriter, RejectsANegativeDimensionEvenWhenAnotherIsZero) {
  // {0, -1} multiplies to 0 bytes, so only an explicit sign check keeps the writer from
  // producing a header that every reader (ours included) refuses.
  auto message = error_message([&] { serialize_safetensors({{"w", DType::U8, {0, -1}, {}}}, {}); });
  EXPECT_NE(message.find("tensor 'w' has the negative dimension -1"), std::string::npos) << message;
}

TEST(SafetensorsWriter, RejectsNamesAndMetadataThatAreNotUtf8AsAnError) {
  // The header is JSON, which must be UTF-8; the failure has to arrive as qtft::Error like
  // every other one, not as a JSON library exception.
  EXPECT_THROW(serialize_safetensors({}, {{"k", "\xff\xfe"}}), qtft::Error);
  const std::vector<std::byte> one = {std::byte{1}};
  auto message = error_message([&] { serialize_safetensors({{"w\xc3", DType::U8, {1}, one}}, {}); });
  EXPECT_NE(message.find("must be UTF-8"), std::string::npos) << message;
}

TEST(SafetensorsFile, AtNamesTheFileWhenATensorIsMissing) {
  auto file = SafetensorsFile::parse(serialize_safetensors({}, {}), "weights.safetensors");
  EXPECT_EQ(file.find("w"), nullptr);
  auto message = error_message([&] { file.at("w"); });
  EXPECT_NE(message.find("weights.safetensors: no tensor named 'w'"), std::string::npos) << message;
}

TEST(SafetensorsFile, ReadOfAMissingFileNamesThePath) {
  TempDir dir;
  auto path = dir.file("absent.safetensors");
  auto message = error_message([&] { SafetensorsFile::read(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
}

// ---- one test per reader rule -------------------------------------------------------------

TEST(SafetensorsReader, RejectsAFileShorterThanTheLengthField) {
  auto message = error_message([] { SafetensorsFile::parse(to_bytes("\x01\x02\x03"), "tiny"); });
  EXPECT_NE(message.find("tiny: not a safetensors file: 3 bytes, shorter than the 8-byte"), std::string::npos)
      << message;
}

TEST(SafetensorsReader, RejectsAHeaderLengthBeyondTheFile) {
  auto message = parse_error("{}", "", 3);
  EXPECT_NE(message.find("header length 3 runs past the end of the file (10 bytes)"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAHeaderLengthOverTheCapBeforeLookingAtTheFileSize) {
  auto message = parse_error("{}", "", kMaxHeaderBytes + 1);
  EXPECT_NE(message.find("exceeds the 100 MB limit"), std::string::npos) << message;
}

TEST(SafetensorsReader, AcceptsAHeaderLengthExactlyAtTheCap) {
  // The cap is inclusive: at exactly kMaxHeaderBytes the complaint is the file size instead.
  auto message = parse_error("{}", "", kMaxHeaderBytes);
  EXPECT_NE(message.find("runs past the end of the file"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsInvalidJson) {
  auto message = parse_error(R"({"a": )");
  EXPECT_NE(message.find("<memory>: safetensors header is not valid JSON"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAHeaderThatIsNotAJsonObject) {
  EXPECT_NE(parse_error("[1, 2]").find("header does not start with '{'"), std::string::npos);
  EXPECT_NE(parse_error("\"text\"").find("header does not start with '{'"), std::string::npos);
  EXPECT_NE(parse_error("").find("header does not start with '{'"), std::string::npos);
}

TEST(SafetensorsReader, RejectsAnUnknownDType) {
  auto message = parse_error(R"({"w":{"dtype":"F24","shape":[1],"data_offsets":[0,3]}})", "abc");
  EXPECT_NE(message.find("tensor 'w': unknown dtype 'F24'"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsNegativeAndFractionalShapeValues) {
  auto negative = parse_error(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", "x");
  EXPECT_NE(negative.find("shape holds -1, not a non-negative integer"), std::string::npos) << negative;
  auto fraction = parse_error(R"({"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", "x");
  EXPECT_NE(fraction.find("shape holds 1.0, not a non-negative integer"), std::string::npos) << fraction;
  // 2^63 fits the JSON parser's unsigned type but not the int64 the shape is stored in.
  auto huge = parse_error(R"({"w":{"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,1]}})", "x");
  EXPECT_NE(huge.find("not a non-negative integer"), std::string::npos) << huge;
}

TEST(SafetensorsReader, RejectsOffsetsThatEndBeforeTheyBegin) {
  auto message = parse_error(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", "abcd");
  EXPECT_NE(message.find("data_offsets [4, 0] end before they begin"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAByteSizeThatDoesNotMatchShapeAndDType) {
  auto message = parse_error(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd");
  EXPECT_NE(message.find("shape and dtype F32 need 8 bytes but data_offsets span 4"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAShapeWhoseByteSizeOverflows) {
  // 2^32 * 2^32 * 1 byte wraps to 0 in 64 bits; without the overflow check this would pass
  // as a zero-size tensor.
  auto message = parse_error(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})");
  EXPECT_NE(message.find("need more than 2^64 bytes"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsOffsetsPastTheDataBuffer) {
  auto message = parse_error(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", "abcd");
  EXPECT_NE(message.find("tensor 'w' ends at byte 8, past the data buffer of 4 bytes"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsOverlappingTensors) {
  auto message = parse_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                             "abcdef");
  EXPECT_NE(message.find("tensor 'b' at bytes [2, 6) overlaps the tensor before it"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAZeroSizeTensorInsideAnother) {
  auto message = parse_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]}})",
                             "abcd");
  EXPECT_NE(message.find("tensor 'z' at bytes [2, 2) overlaps"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAHoleBetweenTensors) {
  auto message = parse_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[6,10]}})",
                             "abcdefghij");
  EXPECT_NE(message.find("hole in the data buffer at bytes [4, 6) before tensor 'b'"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAHoleAtTheStart) {
  auto message = parse_error(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "abcd");
  EXPECT_NE(message.find("hole in the data buffer at bytes [0, 2)"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsTrailingBytes) {
  auto message = parse_error(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abcdef");
  EXPECT_NE(message.find("2 trailing bytes after the last tensor"), std::string::npos) << message;
  // With no tensors at all, every data byte is trailing.
  EXPECT_NE(parse_error("{}", "x").find("1 trailing bytes"), std::string::npos);
}

TEST(SafetensorsReader, RejectsATensorNameGivenTwice) {
  // A JSON library would keep the last "a" silently; the raw text makes the duplicate real.
  auto message = parse_error(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                             R"("a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                             "abcd");
  EXPECT_NE(message.find("header has the key 'a' twice"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsAFieldGivenTwiceInsideATensor) {
  auto message = parse_error(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", "x");
  EXPECT_NE(message.find("has the key 'dtype' twice"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsNonStringMetadata) {
  auto message = parse_error(R"({"__metadata__":{"epoch":3}})");
  EXPECT_NE(message.find("__metadata__ entry 'epoch' is not a string"), std::string::npos) << message;
  auto not_object = parse_error(R"({"__metadata__":"pt"})");
  EXPECT_NE(not_object.find("__metadata__ is not an object"), std::string::npos) << not_object;
}

TEST(SafetensorsReader, RejectsAnUnknownTensorField) {
  auto message = parse_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"strides":[1]}})", "x");
  EXPECT_NE(message.find("tensor 'w': unknown field 'strides'"), std::string::npos) << message;
}

TEST(SafetensorsReader, RejectsMissingTensorFields) {
  EXPECT_NE(parse_error(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "x").find("missing or non-string 'dtype'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", "x").find("missing or non-array 'shape'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", "x")
                .find("'data_offsets' must be two non-negative integers"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"w":[]})").find("header entry is not an object"), std::string::npos);
}

TEST(SafetensorsReader, RejectsNestingDeeperThanTheFormatNeeds) {
  auto message = parse_error(R"({"w":{"dtype":"U8","shape":[[1]],"data_offsets":[0,1]}})", "x");
  EXPECT_NE(message.find("nests deeper than 3 levels"), std::string::npos) << message;
  // Deep enough to exhaust a recursive parser's stack; the depth guard stops it at level 4.
  std::string deep = R"({"w":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(parse_error(deep).find("nests deeper than 3 levels"), std::string::npos);
}

// ---- the malformed corpus -----------------------------------------------------------------

TEST(SafetensorsBadCorpus, EveryFileIsRejectedWithItsManifestPhrase) {
  const auto folder = std::filesystem::path(QTFT_TEST_DATA_DIR) / "safetensors_bad";
  std::ifstream manifest_in(folder / "MANIFEST.json");
  ASSERT_TRUE(manifest_in) << "missing " << (folder / "MANIFEST.json")
                           << "; run python3 scripts/make_bad_safetensors.py";
  auto manifest = nlohmann::json::parse(manifest_in);
  ASSERT_TRUE(manifest.is_object());

  std::set<std::string> seen;
  for (const auto& item : std::filesystem::directory_iterator(folder)) {
    auto name = item.path().filename().string();
    if (name == "MANIFEST.json") continue;
    seen.insert(name);
    // An unlisted file would be a rule nobody checks the message of.
    ASSERT_TRUE(manifest.contains(name)) << name << " is not listed in MANIFEST.json";
    const auto& phrase = manifest[name].get_ref<const std::string&>();
    std::string message;
    try {
      SafetensorsFile::read(item.path());
      ADD_FAILURE() << name << " was accepted";
      continue;
    } catch (const qtft::Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find(phrase), std::string::npos) << name << ": expected '" << phrase << "' in: " << message;
    EXPECT_NE(message.find(item.path().string()), std::string::npos)
        << name << ": the message should name the file: " << message;
  }
  for (const auto& [name, _] : manifest.items()) {
    EXPECT_TRUE(seen.count(name)) << "MANIFEST.json lists " << name << ", which is missing";
  }
  EXPECT_GE(seen.size(), 15u);
}

}  // namespace
}  // namespace qtft::io
