#include "qtft/io/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "qtft/common/error.h"
#include "qtft/io/atomic_file.h"

namespace qtft::io {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 10> kDTypes{{
    {DType::F64, "F64", 8},
    {DType::F32, "F32", 4},
    {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8},
    {DType::I32, "I32", 4},
    {DType::I16, "I16", 2},
    {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},
    {DType::BOOL, "BOOL", 1},
}};

const DTypeInfo& info(DType dtype) {
  for (const auto& i : kDTypes) {
    if (i.dtype == dtype) return i;
  }
  throw Error("safetensors: unknown dtype enumerator");
}

// Our files nest at most object -> tensor object -> shape array; anything deeper is hostile.
constexpr int kMaxJsonDepth = 3;

uint64_t read_le_u64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
  return v;
}

// Parses the header while rejecting duplicate keys (nlohmann keeps the last silently) and
// excessive nesting; both checks run during the parse, before anything is built from it.
nlohmann::json parse_header_json(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> keys_per_object;
  auto guard = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (depth > kMaxJsonDepth) {
      throw Error(source + ": safetensors header nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    if (event == Event::object_start) keys_per_object.emplace_back();
    if (event == Event::object_end && !keys_per_object.empty()) keys_per_object.pop_back();
    if (event == Event::key && !keys_per_object.empty()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys_per_object.back().insert(key).second) {
        throw Error(source + ": safetensors header has the key '" + key + "' twice");
      }
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), guard);
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": safetensors header is not valid JSON: " + e.what());
  }
}

uint64_t checked_byte_size(const std::vector<int64_t>& shape, DType dtype, bool* overflow) {
  uint64_t n = dtype_size(dtype);
  *overflow = false;
  for (int64_t d : shape) {
    auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > UINT64_MAX / ud) {
      *overflow = true;
      return 0;
    }
    n *= ud;
  }
  return n;
}

TensorEntry parse_entry(const std::string& name, const nlohmann::json& j, const std::string& source) {
  auto where = source + ": tensor '" + name + "'";
  if (!j.is_object()) throw Error(where + ": header entry is not an object");
  for (const auto& [key, _] : j.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      throw Error(where + ": unknown field '" + key + "'");
    }
  }
  TensorEntry e;
  e.name = name;
  if (!j.contains("dtype") || !j["dtype"].is_string()) {
    throw Error(where + ": missing or non-string 'dtype'");
  }
  const auto& dtype_text = j["dtype"].get_ref<const std::string&>();
  auto dtype = parse_dtype(dtype_text);
  if (!dtype) throw Error(where + ": unknown dtype '" + dtype_text + "'");
  e.dtype = *dtype;

  if (!j.contains("shape") || !j["shape"].is_array()) {
    throw Error(where + ": missing or non-array 'shape'");
  }
  for (const auto& d : j["shape"]) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      throw Error(where + ": shape holds " + d.dump() + ", not a non-negative integer");
    }
    e.shape.push_back(d.get<int64_t>());
  }

  if (!j.contains("data_offsets") || !j["data_offsets"].is_array() || j["data_offsets"].size() != 2 ||
      !j["data_offsets"][0].is_number_unsigned() || !j["data_offsets"][1].is_number_unsigned()) {
    throw Error(where + ": 'data_offsets' must be two non-negative integers");
  }
  e.begin = j["data_offsets"][0].get<uint64_t>();
  e.end = j["data_offsets"][1].get<uint64_t>();
  if (e.end < e.begin) {
    throw Error(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                "] end before they begin");
  }
  bool overflow = false;
  uint64_t expected = checked_byte_size(e.shape, e.dtype, &overflow);
  if (overflow || expected != e.end - e.begin) {
    throw Error(where + ": shape and dtype " + std::string(dtype_name(e.dtype)) + " need " +
                (overflow ? std::string("more than 2^64") : std::to_string(expected)) +
                " bytes but data_offsets span " + std::to_string(e.end - e.begin));
  }
  return e;
}

}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& i : kDTypes) {
    if (i.name == name) return i.dtype;
  }
  return std::nullopt;
}

uint64_t TensorEntry::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

SafetensorsFile SafetensorsFile::read(const std::filesystem::path& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(path.string() + ": cannot read: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open for reading");
  // The size comes from the file system, not from the file's contents, so it is safe.
  std::vector<std::byte> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) {
    throw Error(path.string() + ": short read (file changed while reading?)");
  }
  return parse(std::move(bytes), path.string());
}

SafetensorsFile SafetensorsFile::parse(std::vector<std::byte> bytes, const std::string& source) {
  SafetensorsFile f;
  f.source_ = source;
  if (bytes.size() < 8) {
    throw Error(source + ": not a safetensors file: " + std::to_string(bytes.size()) +
                " bytes, shorter than the 8-byte header length");
  }
  uint64_t header_len = read_le_u64(bytes.data());
  if (header_len > kMaxHeaderBytes) {
    throw Error(source + ": safetensors header length " + std::to_string(header_len) + " exceeds the 100 MB limit");
  }
  if (header_len > bytes.size() - 8) {
    throw Error(source + ": safetensors header length " + std::to_string(header_len) +
                " runs past the end of the file (" + std::to_string(bytes.size()) + " bytes)");
  }
  std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8, header_len);
  if (header.empty() || header.front() != '{') {
    throw Error(source + ": safetensors header does not start with '{'");
  }
  auto json = parse_header_json(header, source);
  if (!json.is_object()) throw Error(source + ": safetensors header is not a JSON object");

  for (const auto& [name, value] : json.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw Error(source + ": __metadata__ is not an object");
      for (const auto& [key, text] : value.items()) {
        if (!text.is_string()) {
          throw Error(source + ": __metadata__ entry '" + key + "' is not a string");
        }
        f.metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    f.tensors_.push_back(parse_entry(name, value, source));
  }

  // The offsets must tile [0, data size) exactly: sorting by (begin, end) and walking once
  // finds overlaps, holes and trailing bytes alike.
  std::sort(f.tensors_.begin(), f.tensors_.end(),
            [](const auto& a, const auto& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  uint64_t data_size = bytes.size() - 8 - header_len;
  uint64_t cursor = 0;
  for (const auto& t : f.tensors_) {
    if (t.begin < cursor) {
      throw Error(source + ": tensor '" + t.name + "' at bytes [" + std::to_string(t.begin) + ", " +
                  std::to_string(t.end) + ") overlaps the tensor before it");
    }
    if (t.begin > cursor) {
      throw Error(source + ": hole in the data buffer at bytes [" + std::to_string(cursor) + ", " +
                  std::to_string(t.begin) + ") before tensor '" + t.name + "'");
    }
    if (t.end > data_size) {
      throw Error(source + ": tensor '" + t.name + "' ends at byte " + std::to_string(t.end) +
                  ", past the data buffer of " + std::to_string(data_size) + " bytes");
    }
    cursor = t.end;
  }
  if (cursor != data_size) {
    throw Error(source + ": " + std::to_string(data_size - cursor) + " trailing bytes after the last tensor");
  }
  f.data_start_ = 8 + header_len;
  f.file_bytes_ = std::move(bytes);
  return f;
}

const TensorEntry* SafetensorsFile::find(std::string_view name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const TensorEntry& SafetensorsFile::at(std::string_view name) const {
  if (const auto* t = find(name)) return *t;
  throw Error(source_ + ": no tensor named '" + std::string(name) + "'");
}

std::span<const std::byte> SafetensorsFile::bytes_of(const TensorEntry& entry) const {
  return {file_bytes_.data() + data_start_ + entry.begin, entry.end - entry.begin};
}

std::vector<std::byte> serialize_safetensors(const std::vector<TensorBytes>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the header in data-buffer order, which is what readers expect to see.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second) {
      throw Error("safetensors: cannot write two tensors named '" + t.name + "'");
    }
    // Checked apart from the byte size: {0, -1} needs 0 bytes, yet no reader accepts it.
    for (int64_t d : t.shape) {
      if (d < 0) {
        throw Error("safetensors: tensor '" + t.name + "' has the negative dimension " + std::to_string(d));
      }
    }
    bool overflow = false;
    uint64_t expected = checked_byte_size(t.shape, t.dtype, &overflow);
    if (overflow || expected != t.bytes.size()) {
      throw Error("safetensors: tensor '" + t.name + "' has " + std::to_string(t.bytes.size()) +
                  " bytes, its shape and dtype need " + std::to_string(expected));
    }
    header[t.name] = {
        {"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    // JSON text must be UTF-8; a name or metadata value that is not fails here, and callers
    // expect that as an Error like every other rejection.
    throw Error(std::string("safetensors: tensor names and metadata must be UTF-8: ") + e.what());
  }
  // Padding with spaces aligns the data buffer to 8 bytes, as the reference writer does.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<std::byte> out(8 + text.size() + offset);
  uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((len >> (8 * i)) & 0xff);
  std::memcpy(out.data() + 8, text.data(), text.size());
  std::byte* cursor = out.data() + 8 + text.size();
  for (const auto& t : tensors) {
    if (!t.bytes.empty()) std::memcpy(cursor, t.bytes.data(), t.bytes.size());
    cursor += t.bytes.size();
  }
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorBytes>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  auto bytes = serialize_safetensors(tensors, metadata);
  write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace qtft::io
