#include "qtft/train/run_record.h"

#include <nlohmann/json.hpp>

#include "qtft/common/error.h"

namespace qtft::data {
// The column names as a record keeps them (keys: the field names).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(ColumnNames, timestamp, open, high, low, close, volume, symbol)
}  // namespace qtft::data

namespace qtft::train {

nlohmann::json to_json(const RunRecord& r) {
  return {{"save_model", r.save_model},
          {"ranks", r.ranks},
          {"data",
           {{"parquet_file", r.parquet_file},
            {"csv_file", r.csv_file},
            {"columns", r.columns},
            {"symbol", r.symbol},
            {"timestamp_unit", r.timestamp_unit},
            {"feature_store", r.feature_store},
            {"in_memory", r.in_memory}}}};
}

RunRecord run_record_from_json(const nlohmann::json& json, const std::string& file) {
  RunRecord r;
  try {
    r.save_model = json.value("save_model", std::string());
    r.ranks = json.value("ranks", int64_t{1});
    if (json.contains("data")) {
      const auto& d = json.at("data");
      r.parquet_file = d.at("parquet_file").get<std::string>();
      r.csv_file = d.at("csv_file").get<std::string>();
      r.columns = d.at("columns").get<data::ColumnNames>();
      r.symbol = d.at("symbol").get<std::string>();
      r.timestamp_unit = d.at("timestamp_unit").get<std::string>();
      r.feature_store = d.value("feature_store", std::string());
      r.in_memory = d.value("in_memory", false);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(file + ": malformed record of the run to resume: " + e.what());
  }
  return r;
}

}  // namespace qtft::train
