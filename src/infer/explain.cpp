#include "qtft/infer/explain.h"

#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

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

void table(std::string& out, const char* title, const std::vector<std::pair<std::string, double>>& rows) {
  out += std::string(title) + "\n";
  double max_w = 0;
  for (const auto& [_, w] : rows) max_w = std::max(max_w, w);
  char buf[160];
  for (const auto& [name, w] : rows) {
    std::snprintf(buf, sizeof buf, "  %-18s %7.4f  %s\n", name.c_str(), w, bar(w, max_w).c_str());
    out += buf;
  }
}

}  // namespace

Explanation explain_model(model::TemporalFusionTransformer& model, const data::Dataset& dataset, data::Split split,
                          size_t batch_size, c10::Device device) {
  const auto& spec = dataset.spec();
  const int64_t l = dataset.options().encoder_length, h = dataset.options().horizon;
  at::Tensor static_sum = at::zeros({1}, at::kDouble);
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
  e.static_weights = label({"symbol"}, static_sum, n);
  e.encoder_weights = label(past, encoder_sum, n);
  e.decoder_weights = label(future, decoder_sum, n);
  auto a = (attention_sum / n).contiguous();
  e.attention_profile.assign(a.data_ptr<double>(), a.data_ptr<double>() + a.numel());
  return e;
}

std::string format_explanation(const Explanation& e) {
  std::string out = "Explanation over " + std::to_string(e.windows) + " windows\n\n";
  table(out, "Static variable selection:", e.static_weights);
  out += "\n";
  table(out, "Past (encoder) variable selection:", e.encoder_weights);
  out += "\n";
  table(out, "Future (decoder) variable selection:", e.decoder_weights);
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

nlohmann::json to_json(const Explanation& e) {
  auto weights = [](const std::vector<std::pair<std::string, double>>& rows) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [name, w] : rows) j[name] = w;
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
          {"attention", positions}};
}

}  // namespace qtft::infer
