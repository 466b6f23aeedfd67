#include "qtft/artifact/int8_file.h"

#include <ATen/ops/bitwise_and.h>
#include <ATen/ops/bitwise_right_shift.h>
#include <ATen/ops/bitwise_xor.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/round.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/io/tensor_file.h"
#include "qtft/quant/detail/weight_fake_quant.h"
#include "qtft/quant/observers.h"
#include "qtft/quant/quant_params.h"

namespace qtft::artifact {
namespace {

constexpr const char* kInt8Prefix = "int8.";
constexpr size_t kObserversNamed = 5;  // in the never-calibrated message

// Two values per byte, the first in the low nibble; an odd last column pads with 0.
at::Tensor pack_int4(const at::Tensor& q) {
  at::Tensor wide = q.to(at::kShort);
  if (wide.size(1) % 2 != 0) wide = at::constant_pad_nd(wide, {0, 1});
  const at::Tensor low = at::bitwise_and(wide.slice(1, 0, wide.size(1), 2), 0xF);
  const at::Tensor high = at::bitwise_and(wide.slice(1, 1, wide.size(1), 2), 0xF);
  return (low + high * 16).to(at::kByte);
}

// The inverse of pack_int4, as int16 (so that a hostile nibble of 8, that is -8, stays
// visible to the range check) with the padding column, if any, still in place.
at::Tensor unpack_int4(const at::Tensor& packed) {
  const at::Tensor bytes = packed.to(at::kShort);
  auto sign_extend = [](const at::Tensor& nibble) { return at::bitwise_xor(nibble, 8) - 8; };
  const at::Tensor low = sign_extend(at::bitwise_and(bytes, 0xF));
  const at::Tensor high = sign_extend(at::bitwise_right_shift(bytes, 4));
  return at::stack({low, high}, -1).reshape({packed.size(0), packed.size(1) * 2});
}

}  // namespace

void check_observers_calibrated(torch::nn::Module& model, const std::string& source) {
  std::vector<std::string> never;
  const auto stats = quant::observer_stats(model);
  for (const auto& s : stats) {
    if (s.samples == 0) never.push_back(s.name);
  }
  if (never.empty()) return;
  std::string names;
  for (size_t i = 0; i < std::min(never.size(), kObserversNamed); ++i) names += (i ? ", " : "") + never[i];
  if (never.size() > kObserversNamed) names += ", ...";
  throw Error(source + ": " + std::to_string(never.size()) + " of " + std::to_string(stats.size()) +
              " observers never saw data (" + names +
              "), so their scales are placeholders; calibrate them first "
              "(qtft quantize, or qtft train --use-qat)");
}

std::map<std::string, quant::QuantizedWeight> per_channel_integers(const model::TemporalFusionTransformerImpl& model,
                                                                   const std::string& source) {
  const int64_t bits = model.options().weight_bits();
  const quant::QuantRange range = quant::weight_range(bits);
  const auto quantized = model.per_channel_quantized_weights();
  const std::set<std::string> quantized_names(quantized.begin(), quantized.end());
  std::map<std::string, quant::QuantizedWeight> integers;
  for (const auto& [name, weight] : named_weights(model)) {
    if (!quantized_names.count(name)) continue;
    // The scales and rounding of quant::fake_quantize_weight; q * scale is then the value
    // fake quantization gives, bitwise, which is checked rather than assumed.
    const at::Tensor scales = quant::symmetric_per_channel_scales(weight, 0, range.qmax);
    const at::Tensor fake = quant::fake_quantize_weight(weight, bits);
    const at::Tensor q = at::round(fake / scales.unsqueeze(1)).to(at::kChar);
    if (!at::equal(q.to(at::kFloat) * scales.unsqueeze(1), fake)) {
      throw Error(source + ": " + name + ": the integers times their scales differ from the fake-quantized weight");
    }
    integers.emplace(name, quant::QuantizedWeight{q, scales.contiguous()});
  }
  return integers;
}

Int8ExportSummary export_int8_file(const ModelFile& qat_model, const std::string& source,
                                   const std::filesystem::path& output) {
  if (qat_model.int8_weights) throw Error(source + ": already an int8 export");
  if (!qat_model.options.use_qat()) {
    throw Error(source +
                ": not a QAT model, so there is no quantization to export; train it with --use-qat, or "
                "quantize it first (qtft quantize)");
  }
  ModelFile copy{qat_model.options, qat_model.features, qat_model.dataset, qat_model.weights, std::nullopt};
  auto loaded = model_from_file(std::move(copy), source, c10::Device(c10::kCPU));
  auto& model = *loaded.model;
  check_observers_calibrated(model, source);

  const int64_t bits = qat_model.options.weight_bits();
  const auto integers = per_channel_integers(model, source);

  io::TensorFile out;
  out.metadata = model_file_metadata(qat_model, kInt8Format);
  nlohmann::json shapes = nlohmann::json::object();
  Int8ExportSummary summary;
  for (const auto& [name, weight] : named_weights(model)) {
    const auto quantized = integers.find(name);
    if (quantized == integers.end()) {
      out.tensors.emplace_back(kModelWeightPrefix + name, weight);
      summary.float_values += weight.numel();
      continue;
    }
    const at::Tensor& q = quantized->second.values;
    const at::Tensor& scales = quantized->second.scales;
    const std::string key = kInt8Prefix + name;
    out.tensors.emplace_back(key, bits == 4 ? pack_int4(q) : q);
    out.tensors.emplace_back(key + ".scale", scales.contiguous());
    out.tensors.emplace_back(key + ".zero_point", at::zeros({scales.size(0)}, scales.options().dtype(at::kChar)));
    shapes[name] = {weight.size(0), weight.size(1)};
    ++summary.quantized_tensors;
    summary.quantized_values += weight.numel();
  }
  out.metadata["qtft.int8"] = nlohmann::json{{"weight_bits", bits}, {"shapes", shapes}}.dump();
  io::save_tensor_file(output, out);
  summary.file_bytes = std::filesystem::file_size(output);
  return summary;
}

Int8Weights dequantize_int8_tensors(io::TensorFile& file, const std::string& source) {
  auto fail = [&](const std::string& what) { throw Error(source + ": " + what); };
  const auto meta = file.metadata.find("qtft.int8");
  if (meta == file.metadata.end()) fail("an int8 export without its 'qtft.int8' metadata");
  const auto json = nlohmann::json::parse(meta->second, nullptr, false);
  if (json.is_discarded() || !json.is_object()) fail("metadata 'qtft.int8' is not a JSON object");
  const auto bits_it = json.find("weight_bits");
  if (bits_it == json.end() || !bits_it->is_number_integer() || (*bits_it != 8 && *bits_it != 4)) {
    fail("qtft.int8: weight_bits must be 8 or 4, got " + (bits_it == json.end() ? "nothing" : bits_it->dump()));
  }
  Int8Weights result;
  const int64_t bits = result.weight_bits = bits_it->get<int64_t>();
  const quant::QuantRange range = quant::weight_range(bits);
  const auto shapes = json.find("shapes");
  if (shapes == json.end() || !shapes->is_object()) fail("qtft.int8: 'shapes' must be an object of [rows, cols]");

  std::map<std::string, at::Tensor> int8;
  std::vector<std::pair<std::string, at::Tensor>> kept;
  for (auto& [name, t] : file.tensors) {
    if (name.rfind(kInt8Prefix, 0) == 0) {
      int8.emplace(name, t);
    } else {
      kept.emplace_back(name, t);
    }
  }
  auto take = [&](const std::string& key, at::ScalarType dtype, at::IntArrayRef shape) {
    const auto it = int8.find(key);
    if (it == int8.end()) fail("tensor " + key + " is missing");
    const at::Tensor t = it->second;
    int8.erase(it);
    if (t.scalar_type() != dtype || t.sizes() != shape) {
      fail("tensor " + key + " is " + std::string(c10::toString(t.scalar_type())) + " " +
           format_shape(t.sizes().vec()) + ", expected " + c10::toString(dtype) + " " + format_shape(shape.vec()));
    }
    return t;
  };
  for (const auto& [name, shape] : shapes->items()) {
    if (!shape.is_array() || shape.size() != 2 || !shape[0].is_number_integer() || !shape[1].is_number_integer() ||
        shape[0].get<int64_t>() < 1 || shape[1].get<int64_t>() < 1) {
      fail("qtft.int8: the shape of " + name + " must be [rows, cols] of positive integers, got " + shape.dump());
    }
    const int64_t rows = shape[0].get<int64_t>(), cols = shape[1].get<int64_t>();
    const std::string key = kInt8Prefix + name;
    at::Tensor values = bits == 4 ? unpack_int4(take(key, at::kByte, {rows, (cols + 1) / 2}))
                                  : take(key, at::kChar, {rows, cols}).to(at::kShort);
    if (values.size(1) != cols) {
      if (values.narrow(1, cols, 1).ne(0).any().item<bool>()) fail("tensor " + key + ": its padding nibbles are not 0");
      values = values.narrow(1, 0, cols);
    }
    if (values.lt(range.qmin).any().item<bool>() || values.gt(range.qmax).any().item<bool>()) {
      fail("tensor " + key + " holds values outside [" + std::to_string(range.qmin) + ", " +
           std::to_string(range.qmax) + "], the range of " + std::to_string(bits) + "-bit weights");
    }
    const at::Tensor scales = take(key + ".scale", at::kFloat, {rows});
    if (!at::isfinite(scales).all().item<bool>() || !scales.gt(0).all().item<bool>()) {
      fail("tensor " + key + ".scale holds a scale that is not a finite positive number");
    }
    if (take(key + ".zero_point", at::kChar, {rows}).ne(0).any().item<bool>()) {
      fail("tensor " + key + ".zero_point is not all 0 (the weights are quantized symmetrically)");
    }
    kept.emplace_back(kModelWeightPrefix + name, values.to(at::kFloat) * scales.unsqueeze(1));
    result.weights[name] = quant::QuantizedWeight{values.to(at::kChar), scales};
  }
  if (!int8.empty()) fail("tensor " + int8.begin()->first + " is not listed in qtft.int8");
  file.tensors = std::move(kept);
  return result;
}

}  // namespace qtft::artifact
