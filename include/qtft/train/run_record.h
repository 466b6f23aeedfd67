#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "qtft/data/bars/bars.h"

namespace qtft::train {

// What a saved run records of the request that made it (TrainingState::run), so that
// `qtft train --resume --load-model F` alone continues it: where it saves, on how many
// ranks, and where its bars come from and how they are read.
struct RunRecord {
  std::string save_model;  // absolute; empty: none
  int64_t ranks = 1;
  std::string parquet_file, csv_file;  // absolute; both empty: the embedded data
  data::ColumnNames columns;
  std::string symbol;                   // --symbol
  std::string timestamp_unit = "auto";  // --timestamp-unit, as given
  std::string feature_store;            // absolute; empty: the default place
  bool in_memory = false;               // --no-feature-store
};

nlohmann::json to_json(const RunRecord& record);
// Throws qtft::Error naming `file` when the record is malformed. Records written before
// feature stores existed lack those two keys and read as their defaults; records without
// data (a run that never saved one) keep every data field at its default.
RunRecord run_record_from_json(const nlohmann::json& json, const std::string& file);

}  // namespace qtft::train
