#include "qtft/infer/explain.h"

#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "qtft/eval/evaluate.h"

namespace qtft::infer {
namespace {

std::vector<std::pair<std::string, double>> label(const std::vector<std::string>& names, const at::Tensor& sums,
                                                  double count) {
  std::vector<std::pair<std::string, double>> out;
  auto s = sums.to(at::kDouble).contiguous();
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], s.data_ptr<double>()[i] / count);
  return out;
}

std::string bar(double weight, double max_weight) {
  int n = max_weight > 0 ? static_cast<int>(30.0 * weight / max_weight + 0.5) : 0;
  return std::string(static_cast<size_t>(n), '#');
}

using Weights = std::vector<std::pair<std::string, double>>;

// The inputs by weight, heaviest first (ties in input order), the first `top` (all for 0).
Weights ranked(const Weights& rows, size_t top) {
  Weights out = rows;
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (top > 0 && out.size() > top) out.resize(top);
  return out;
}

void table(std::string& out, const char* title, const Weights& rows, size_t of = 0) {
  out += std::string(title) + "\n";
  double max_w = 0;
  for (const auto& [_, w] : rows) max_w = std::max(max_w, w);
  char buf[160];
  for (const auto& [name, w] : rows) {
    std::snprintf(buf, sizeof buf, "  %-18s %7.4f  %s\n", name.c_str(), w, bar(w, max_w).c_str());
    out += buf;
  }
  if (of > rows.size()) out += "  and " + std::to_string(of - rows.size()) + " more below (--top)\n";
}

}  // namespace

Explanation explain_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                          size_t batch_size, c10::Device device) {
  const auto& spec = dataset.spec();
  const int64_t l = dataset.options().encoder_length, h = dataset.options().horizon;
  at::Tensor static_sum = at::zeros({1 + static_cast<int64_t>(spec.statics.size())}, at::kDouble);
  at::Tensor encoder_sum = at::zeros({static_cast<int64_t>(spec.observed.size() + spec.known.size())}, at::kDouble);
  at::Tensor decoder_sum = at::zeros({static_cast<int64_t>(spec.known.size())}, at::kDouble);
  at::Tensor attention_sum = at::zeros({l + h}, at::kDouble);
  int64_t windows = 0;
  eval::for_each_forecast(
      model, dataset, split, batch_size, device, [&](const data::Batch& batch, const model::TftOutput& out) {
        static_sum += out.static_weights.to(at::kCPU).to(at::kDouble).sum({0});
        // Encoder and decoder weights are averaged over time as well as windows.
        encoder_sum += out.encoder_weights.to(at::kCPU).to(at::kDouble).sum({0, 1}) / static_cast<double>(l);
        decoder_sum += out.decoder_weights.to(at::kCPU).to(at::kDouble).sum({0, 1}) / static_cast<double>(h);
        attention_sum += out.attention.to(at::kCPU).to(at::kDouble).sum({0, 1}) / static_cast<double>(h);
        windows += batch.size();
      });
  Explanation e;
  e.windows = windows;
  e.encoder_length = l;
  const double n = static_cast<double>(std::max<int64_t>(1, windows));
  std::vector<std::string> past, future;
  for (const auto& s : spec.observed) past.push_back(s.name);
  for (const auto& s : spec.known) {
    past.push_back(s.name);
    future.push_back(s.name);
  }
  std::vector<std::string> statics{"symbol"};
  for (const auto& s : spec.statics) statics.push_back(s.name);
  e.static_weights = label(statics, static_sum, n);
  e.encoder_weights = label(past, encoder_sum, n);
  e.decoder_weights = label(future, decoder_sum, n);
  auto a = (attention_sum / n).contiguous();
  e.attention_profile.assign(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
  return e;
}

std::string format_explanation(const Explanation& e, size_t top) {
  std::string out = "Explanation over " + std::to_string(e.windows) + " windows; each selector's inputs by weight\n\n";
  table(out, "Static variable selection:", ranked(e.static_weights, top), e.static_weights.size());
  out += "\n";
  table(out, "Past (encoder) variable selection:", ranked(e.encoder_weights, top), e.encoder_weights.size());
  out += "\n";
  table(out, "Future (decoder) variable selection:", ranked(e.decoder_weights, top), e.decoder_weights.size());
  out += "\nAttention of the decoder to each position (mean over steps and windows):\n";
  std::vector<std::pair<std::string, double>> rows;
  for (size_t i = 0; i < e.attention_profile.size(); ++i) {
    auto pos = static_cast<int64_t>(i) - e.encoder_length;
    // Appending (not "t" + string) sidesteps a GCC 12 -Wstringop-overflow false positive.
    std::string label(pos < 0 ? "t" : "t+");
    label.append(std::to_string(pos < 0 ? pos : pos + 1));
    rows.emplace_back(label, e.attention_profile[i]);
  }
  table(out, "", rows);
  return out;
}

nlohmann::json to_json(const Explanation& e, size_t top) {
  auto weights = [](const std::vector<std::pair<std::string, double>>& rows) {
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

}  // namespace qtft::infer
