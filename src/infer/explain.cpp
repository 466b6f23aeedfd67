#include "qtft/infer/explain.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "qtft/eval/evaluate.h"

namespace qtft::infer {
namespace {

std::string bar(double weight, double max_weight) {
  int n = max_weight > 0 ? static_cast<int>(30.0 * weight / max_weight + 0.5) : 0;
  return std::string(static_cast<size_t>(n), '#');
}

using Weights = std::vector<std::pair<std::string, double>>;
using eval::ranked;

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
  eval::ExplanationAccumulator explanation(dataset.schema(), dataset.options());
  eval::for_each_forecast(model, dataset, split, batch_size, device,
                          [&](const data::Batch&, const model::TftOutput& out) { explanation.add(out); });
  return explanation.result();
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

}  // namespace qtft::infer
