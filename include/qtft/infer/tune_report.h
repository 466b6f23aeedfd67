#pragma once

// `qtft report --tune DIR`: a search's folder (qtft tune's --output) as one self-contained
// HTML page: how each trial fared rung after rung, the trials table, and the learning-rate
// range test's curve when the folder holds one (lr_find.json).

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace qtft::infer {

// The range test's curve (train::to_json(LrRangeResult)'s document) as one SVG chart: the
// losses' moving average and the suggested rate, against the rate on a log scale.
std::string lr_range_chart(const nlohmann::json& lr_find);

// A page holding that chart alone, for `qtft tune --find-lr`'s lr_find.html.
std::string lr_range_page(const nlohmann::json& lr_find, const std::string& title);

// The page for the search in `folder`. Throws UsageError when the folder holds no tune
// journal (naming it and what to give), qtft::Error when the journal is not one qtft wrote.
std::string tune_report_html(const std::filesystem::path& folder, const std::string& title);

}  // namespace qtft::infer
