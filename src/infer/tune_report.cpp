// A search's folder as a page: the trials rung after rung, the table, the range test's curve.
#include "qtft/infer/tune_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "qtft/common/error.h"
#include "qtft/infer/detail/report_page.h"
#include "qtft/infer/detail/svg_chart.h"
#include "qtft/train/tune.h"

namespace qtft::infer {
namespace {

using detail::cell;
using detail::escape_html;
using detail::kBlue;
using detail::kOrange;
using detail::section;
using detail::SvgChart;
namespace fs = std::filesystem;
using Json = nlohmann::json;

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  try {
    return Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(path.string() + ": not readable JSON (" + e.what() + ")");
  }
}

// A run's or a point's number by key: NaN when absent or null (a failed trial's loss).
double number_or_nan(const Json& j, const char* key) { return detail::number_at(j, Json::json_pointer() / key); }

// The run that won, as train::run_tune picks it. Null when no run of the furthest rung trained.
const Json* best_run(const Json& runs) {
  std::vector<train::TrialRun> parsed;
  for (const auto& r : runs) parsed.push_back(train::trial_run_from_json(r));
  const auto best = train::best_of_furthest_rung(parsed);
  if (!best) return nullptr;
  for (const auto& r : runs) {
    if (r.at("trial") == best->trial && r.at("rung") == best->rung) return &r;
  }
  return nullptr;
}

std::string option_text(const Json& v) {
  if (v.is_number_float()) return cell(v.get<double>(), "%.4g");
  return escape_html(v.dump());
}

std::string trials_chart(const Json& runs, const Json* best, const std::string& objective) {
  // One line per trial through the rungs it reached: the budget on a log scale.
  std::map<int64_t, std::pair<std::vector<double>, std::vector<double>>> by_trial;
  double low = INFINITY, high = -INFINITY;
  for (const auto& r : runs) {
    const double budget = r.at("budget").get<double>();
    auto& [x, y] = by_trial[r.at("trial").get<int64_t>()];
    x.push_back(std::log10(budget));
    y.push_back(number_or_nan(r, "objective"));
    low = std::min(low, budget);
    high = std::max(high, budget);
  }
  SvgChart chart(720, 300, "The trials rung after rung: " + objective + " (lower is better) against the budget");
  const int64_t best_trial = best ? best->at("trial").get<int64_t>() : -1;
  for (const auto& [trial, xy] : by_trial) {
    if (trial != best_trial) chart.line(xy.first, xy.second, detail::kLightGrey, "", 1.0);
  }
  if (best) {
    const auto& xy = by_trial.at(best_trial);
    chart.line(xy.first, xy.second, kOrange, "best: trial " + std::to_string(best_trial), 2.5);
  }
  chart.x_labels("budget " + cell(low, "%.3g") + " (log scale)", "budget " + cell(high, "%.3g"));
  chart.y_label(objective);
  return chart.svg();
}

std::string trials_table(const Json& runs, const Json* best) {
  std::set<std::string> names;
  for (const auto& r : runs) {
    for (const auto& [name, _] : r.at("options").items()) names.insert(name);
  }
  // The furthest rung first, each rung best first: the winner heads the table.
  std::vector<const Json*> rows;
  for (const auto& r : runs) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const Json* a, const Json* b) {
    const auto ra = a->at("rung").get<int64_t>(), rb = b->at("rung").get<int64_t>();
    if (ra != rb) return ra > rb;
    const double oa = number_or_nan(*a, "objective"), ob = number_or_nan(*b, "objective");
    if (std::isnan(oa) != std::isnan(ob)) return std::isnan(ob);
    return oa < ob;
  });
  std::string t = "<table><tr><th>trial</th><th>rung</th><th>budget</th>";
  for (const auto& n : names) t += "<th>" + escape_html(n) + "</th>";
  t += "<th>validation loss</th><th>objective</th><th>seconds</th></tr>\n";
  for (const Json* r : rows) {
    const bool is_best = r == best;
    t += is_best ? "<tr style=\"font-weight:bold\">" : "<tr>";
    t += "<td>" + std::to_string(r->at("trial").get<int64_t>()) + "</td><td>" +
         std::to_string(r->at("rung").get<int64_t>()) + "</td><td>" + cell(r->at("budget").get<double>(), "%.3g") +
         "</td>";
    for (const auto& n : names) {
      const auto& o = r->at("options");
      t += "<td>" + (o.contains(n) ? option_text(o.at(n)) : std::string()) + "</td>";
    }
    const double loss = number_or_nan(*r, "val_loss");
    t += "<td>" + (std::isnan(loss) ? std::string("failed") : cell(loss, "%.5f")) + "</td><td>" +
         cell(number_or_nan(*r, "objective"), "%.5f") + "</td><td>" + cell(number_or_nan(*r, "seconds"), "%.1f") +
         "</td></tr>\n";
  }
  return t + "</table>\n";
}

std::string search_table(const Json& identity, const Json& runs) {
  double seconds = 0;
  for (const auto& r : runs) seconds += number_or_nan(r, "seconds");
  std::string t = "<table class=\"options\">";
  const auto row = [&](const std::string& name, const std::string& value) {
    t += "<tr><th>" + escape_html(name) + "</th><td>" + value + "</td></tr>\n";
  };
  for (const char* key : {"method", "objective", "trials", "eta", "seed"}) {
    if (identity.contains(key)) row(key, escape_html(identity.at(key).dump()));
  }
  row("ranges", "<code>" + escape_html(identity.value("space", Json::object()).dump()) + "</code>");
  row("trial runs recorded", std::to_string(runs.size()));
  row("training time", cell(seconds, "%.1f") + " s");
  return t + "</table>\n";
}

}  // namespace

std::string lr_range_chart(const Json& lr_find) {
  // The moving average alone, as Lightning draws it: one batch's loss swings, and the run-away
  // losses at the end would flatten the rest of the curve.
  std::vector<double> x, smoothed;
  for (const auto& p : lr_find.at("points")) {
    x.push_back(std::log10(p.at("learning_rate").get<double>()));
    smoothed.push_back(number_or_nan(p, "smoothed"));
  }
  SvgChart chart(720, 300, "Learning-rate range test");
  chart.line(x, smoothed, kBlue, "loss, moving average", 2.0);
  const double suggested = number_or_nan(lr_find, "suggested_learning_rate");
  if (std::isfinite(suggested) && !x.empty()) {
    double low = INFINITY, high = -INFINITY;
    for (double v : smoothed) {
      if (std::isfinite(v)) low = std::min(low, v), high = std::max(high, v);
    }
    const double at = std::log10(suggested);
    chart.line({at, at}, {low, high}, kOrange, "suggested " + cell(suggested, "%.2g"), 1.5, true);
  }
  if (!x.empty()) {
    chart.x_labels("rate " + cell(std::pow(10.0, x.front()), "%.2g") + " (log scale)",
                   "rate " + cell(std::pow(10.0, x.back()), "%.2g"));
  }
  chart.y_label("quantile loss (scaled)");
  return chart.svg();
}

std::string lr_range_page(const Json& lr_find, const std::string& title) {
  const double suggested = number_or_nan(lr_find, "suggested_learning_rate");
  std::string lead = "Each step trains one batch at a rate " +
                     cell(lr_find.at("min_learning_rate").get<double>(), "%.2g") + " times a constant factor, up to " +
                     cell(lr_find.at("max_learning_rate").get<double>(), "%.2g") +
                     (lr_find.value("diverged", false) ? " (stopped early: the loss diverged)" : "") + ". ";
  lead += std::isfinite(suggested)
              ? "The suggested rate, where the moving average falls fastest, is " + cell(suggested, "%.3g") + "."
              : "The sweep was too short to suggest a rate.";
  return detail::report_page(title, lead, section("The curve", lr_range_chart(lr_find)));
}

std::string tune_report_html(const fs::path& folder, const std::string& title) {
  const fs::path journal_path = folder / "journal.json";
  std::error_code ec;
  if (!fs::exists(journal_path, ec)) {
    throw UsageError(folder.string() +
                     ": not a search's folder (no journal.json); give the --output folder of qtft tune");
  }
  const Json journal = read_json(journal_path);
  if (!journal.is_object() || journal.value("format", "") != train::kTuneFormat) {
    throw Error(journal_path.string() + ": not a qtft tune journal (format " + train::kTuneFormat + ")");
  }
  const Json& runs = journal.at("runs");
  const Json& identity = journal.at("identity");
  const Json* best = best_run(runs);
  const std::string objective = identity.value("objective", "loss");
  const std::string objective_name = objective == "loss" ? "validation loss"
                                     : objective == "ic" ? "minus the IC"
                                                         : "coverage's distance from nominal";
  std::string body = section("The search", search_table(identity, runs));
  if (best) {
    std::string options;
    for (const auto& [name, value] : best->at("options").items()) {
      options += (options.empty() ? "" : ", ") + escape_html(name) + " " + option_text(value);
    }
    body += section("Best", "<p>Trial " + std::to_string(best->at("trial").get<int64_t>()) + " at rung " +
                                std::to_string(best->at("rung").get<int64_t>()) + ": " + options + "; " +
                                objective_name + " " + cell(best->at("objective").get<double>(), "%.5f") + ".</p>\n");
  }
  body += section("Trials", runs.empty() ? "<p>No trial run is recorded yet.</p>\n"
                                         : trials_chart(runs, best, objective_name) + trials_table(runs, best));
  const fs::path lr_find = folder / "lr_find.json";
  if (fs::exists(lr_find, ec)) body += section("Learning-rate range test", lr_range_chart(read_json(lr_find)));
  return detail::report_page(title.empty() ? "Tuning: " + folder.filename().string() : title,
                             "Every trial trains on the same data from options drawn from the ranges; "
                             "successive halving gives the best of each rung a larger budget on the next.",
                             body);
}

}  // namespace qtft::infer
