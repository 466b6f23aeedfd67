#pragma once

#include <functional>
#include <optional>
#include <string>

#include "qtft/data/bars/bar_source.h"
#include "qtft/data/features/dataset.h"

namespace qtft::data {

// A prepared feature store: one file holding every series' features, targets, timestamps,
// closes and split bounds as flat arrays, with an index (JSON) at its end. It is mapped for
// the views a Dataset hands out, and batches copy from it with pread: a dataset of any
// number of rows costs the process what a batch copies, and the processes of one machine
// share one copy of the data through the page cache.
//
// A store is named by a fingerprint of what it was built from (every source file's path,
// size and modification time; the column and timestamp options; the splits; a saved model's
// feature spec), so that a store of other files or options is never used. The windows are
// not in it: a row's features do not depend on how many bars a window reads, so runs of
// other encoder lengths or horizons (the trials of `qtft tune`) map one store.
// It is written under a temporary name and renamed, so a store that exists is complete.
struct StorePreparation {
  std::string path;
  bool built = false;  // false: an existing store was reused
  std::string reason;  // why it was built, or that it was reused
  int64_t bars = 0;
  int64_t series = 0;
  int64_t bytes = 0;     // the store's size on disk
  double seconds = 0.0;  // time to build (0 when reused)
};

enum class StoreAccess {
  BuildIfNeeded,  // build the store when it is missing or was built from other files/options
  MustExist,      // only map it (ranks waiting for the one that builds): missing is an error
};

// The store for `source` under `options` (and `saved`, a model's feature spec, when given).
// Throws qtft::UsageError when the source has no store folder (the embedded data, or a file
// without --feature-store).
StorePreparation prepare_feature_store(const BarSource& source, const DatasetOptions& options, const InputSchema* saved,
                                       StoreAccess access = StoreAccess::BuildIfNeeded);

// The store for `source` under `options` (and `saved`) when one exists; never builds. What a
// process waits on while another builds it.
std::optional<StorePreparation> find_feature_store(const BarSource& source, const DatasetOptions& options,
                                                   const InputSchema* saved);

// A mapped store as a Dataset windowed by `windows` (its encoder length and horizon; its
// splits must be the store's). Throws qtft::Error naming the file when it is not a complete
// feature store, or was built for other splits.
Dataset map_feature_store(const std::string& path, const DatasetOptions& windows);

// `source` reading the declared columns that `spec` (a model's) reads, whatever it declared:
// how bars are read for a saved model. prepare_feature_store and open_dataset apply it.
BarSource with_model_inputs(BarSource source, const InputSchema& spec);

// What every data-reading command calls: the source's features from its feature store
// (prepared first; `prepared` hears how) when it has a store folder, else computed in memory.
Dataset open_dataset(const BarSource& source, const DatasetOptions& options, const InputSchema* saved,
                     StoreAccess access = StoreAccess::BuildIfNeeded,
                     const std::function<void(const StorePreparation&)>& prepared = {});

}  // namespace qtft::data
