#include "qtft/eval/explanation.h"

#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace qtft::eval {
namespace {

using Weights = std::vector<std::pair<std::string, double>>;

Weights label(const std::vector<std::string>& names, const at::Tensor& sums, double count) {
  Weights out;
  auto s = sums.to(at::kDouble).contiguous();
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], s.data_ptr<double>()[i] / count);
  return out;
}

}  // namespace

ExplanationAccumulator::ExplanationAccumulator(const data::InputSchema& spec, const data::DatasetOptions& options)
    : encoder_length_(options.encoder_length), horizon_(options.horizon) {
  statics_.push_back("symbol");
  for (const auto& s : spec.statics) statics_.push_back(s.name);
  for (const auto& s : spec.observed) past_.push_back(s.name);
  for (const auto& s : spec.known) {
    past_.push_back(s.name);
    future_.push_back(s.name);
  }
  static_sum_ = at::zeros({static_cast<int64_t>(statics_.size())}, at::kDouble);
  encoder_sum_ = at::zeros({static_cast<int64_t>(past_.size())}, at::kDouble);
  decoder_sum_ = at::zeros({static_cast<int64_t>(future_.size())}, at::kDouble);
  attention_sum_ = at::zeros({encoder_length_ + horizon_}, at::kDouble);
}

void ExplanationAccumulator::add(const model::TftOutput& out) {
  static_sum_ += out.static_weights.to(at::kCPU).to(at::kDouble).sum({0});
  // Encoder and decoder weights are averaged over time as well as windows.
  encoder_sum_ += out.encoder_weights.to(at::kCPU).to(at::kDouble).sum(at::IntArrayRef{0, 1}) /
                  static_cast<double>(encoder_length_);
  decoder_sum_ +=
      out.decoder_weights.to(at::kCPU).to(at::kDouble).sum(at::IntArrayRef{0, 1}) / static_cast<double>(horizon_);
  attention_sum_ +=
      out.attention.to(at::kCPU).to(at::kDouble).sum(at::IntArrayRef{0, 1}) / static_cast<double>(horizon_);
  windows_ += out.static_weights.size(0);
}

Explanation ExplanationAccumulator::result() const {
  Explanation e;
  e.windows = windows_;
  e.encoder_length = encoder_length_;
  const double n = static_cast<double>(std::max<int64_t>(1, windows_));
  e.static_weights = label(statics_, static_sum_, n);
  e.encoder_weights = label(past_, encoder_sum_, n);
  e.decoder_weights = label(future_, decoder_sum_, n);
  auto a = (attention_sum_ / n).contiguous();
  e.attention_profile.assign(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
  return e;
}

Weights ranked(const Weights& rows, size_t top) {
  Weights out = rows;
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (top > 0 && out.size() > top) out.resize(top);
  return out;
}

nlohmann::json to_json(const Explanation& e, size_t top) {
  auto weights = [](const Weights& rows) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, w] : rows) j[name] = w;
    return j;
  };
  auto ranking = [top](const Weights& rows) {
    nlohmann::json j = nlohmann::json::array();
    int64_t rank = 0;
    for (const auto& [name, w] : ranked(rows, top)) j.push_back({{"rank", ++rank}, {"input", name}, {"weight", w}});
    return j;
  };
  nlohmann::json positions = nlohmann::json::array();
  for (size_t i = 0; i < e.attention_profile.size(); ++i) {
    positions.push_back({{"position", static_cast<int64_t>(i) - e.encoder_length}, {"weight", e.attention_profile[i]}});
  }
  return {{"windows", e.windows},
          {"static_weights", weights(e.static_weights)},
          {"encoder_weights", weights(e.encoder_weights)},
          {"decoder_weights", weights(e.decoder_weights)},
          {"attention", positions},
          {"ranking",
           {{"static", ranking(e.static_weights)},
            {"encoder", ranking(e.encoder_weights)},
            {"decoder", ranking(e.decoder_weights)}}}};
}

}  // namespace qtft::eval
