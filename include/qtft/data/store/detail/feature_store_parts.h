#pragma once

#include <cstdint>

#include "qtft/data/store/feature_store.h"

namespace qtft::data::detail {

// prepare_feature_store, featurizing each series `part_rows` rows at a time (0: as many as
// about 64 MiB of a part's working memory holds at the inputs' width, the default). A store is
// bitwise the same whatever the parts; tests build one in parts of a few rows to show it.
StorePreparation prepare_feature_store_in_parts(const BarSource& source, const DatasetOptions& options,
                                                const InputSchema* saved, uint64_t part_rows);

}  // namespace qtft::data::detail
