#pragma once

#include <nlohmann/json_fwd.hpp>

#include "qtft/data/features/dataset.h"

namespace qtft::data {

// JSON forms saved in a model file's metadata, so that evaluation and prediction rebuild
// exactly the features and windows the model was trained on.
nlohmann::json to_json(const InputSchema& spec);
InputSchema input_schema_from_json(const nlohmann::json& json);
nlohmann::json to_json(const DatasetOptions& options);
DatasetOptions dataset_options_from_json(const nlohmann::json& json);

}  // namespace qtft::data
