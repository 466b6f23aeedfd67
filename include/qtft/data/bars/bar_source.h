#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "qtft/data/bars/bars.h"
#include "qtft/data/bars/synthetic.h"

namespace qtft::data {

// Where bars come from: a Parquet file or a folder of them (a dataset, Hive partitions
// allowed), a CSV file, or (none given) the embedded synthetic data set. One struct so that
// the CLI and embedding programs load alike.
struct BarSource {
  std::string parquet_file;  // a file, or a folder read recursively
  std::string csv_file;
  BarReadOptions read;
  SyntheticOptions synthetic;
  // Where feature stores are prepared (data/feature_store.h). Empty: "<folder>/_qtft_store"
  // for a dataset folder (Arrow's discovery skips names starting with '_'), or, when the
  // folder is not writable and holds no store, a folder of the user's cache
  // ($XDG_CACHE_HOME/qtft/stores/<name>-<hash of the path>, else ~/.cache/...); none for a file.
  std::string feature_store;
  bool in_memory = false;  // no feature store: every feature in memory, as for a small file
  // Only the bars timed in [from_ns, through_ns] (UTC ns), as if the source held no others: a
  // walk-forward fold trains on what was known at its date, and reads the few bars it
  // forecasts. A folder is trimmed file by file as it is read, and a feature store prepared
  // for a cut source holds only its bars (the cut is in its fingerprint).
  int64_t from_ns = std::numeric_limits<int64_t>::min();
  int64_t through_ns = std::numeric_limits<int64_t>::max();
  // When not empty, only the symbols listed, each from its own first bar (UTC ns), within the
  // cut above: an update reads its model's series from the encoder's history before their
  // new bars (train/detail/update.h), through a feature store that holds no other bar.
  std::vector<std::pair<std::string, int64_t>> series_from_ns;
  bool is_cut() const {
    return from_ns != std::numeric_limits<int64_t>::min() || through_ns != std::numeric_limits<int64_t>::max() ||
           !series_from_ns.empty();
  }
  bool uses_embedded_data() const { return parquet_file.empty() && csv_file.empty(); }
  bool is_dataset_folder() const;
  std::string feature_store_folder() const;  // "" when the features are held in memory
  // Why the store folder is not the default one next to the data ("" when it is).
  std::string feature_store_note() const;
};

// Keeps the bars of `bars` inside the source's cut (from_ns, through_ns, series_from_ns).
void cut_bars(BarSet& bars, const BarSource& source);

// The source's bars a part at a time, cut: a folder's files and a Parquet file a record batch
// (64Ki rows) at a time, a CSV file or the embedded data whole. Memory follows a part. Throws
// qtft::Error naming the source when it holds no rows.
void for_each_bar_part(const BarSource& source, const std::function<void(const BarSet& part)>& use);

// Every bar of the source in memory (a folder's files concatenated per symbol, in path order),
// inside its cut; a series with no bar there is left out.
BarSet load_bars(const BarSource& source);

// The source's clock: every series' timestamps merged, each once, in increasing order; and
// each series' first bar. A folder is read file by file, so memory follows the largest file
// and the clock, not the history.
struct SourceClock {
  std::vector<int64_t> timeline;
  std::vector<std::pair<std::string, int64_t>> first_bar;  // symbol, its first bar's time
};
SourceClock read_source_clock(const BarSource& source);
// The same of bars in memory; merge_clock adds another part's (a folder's next file).
SourceClock clock_of(const BarSet& bars);
void merge_clock(SourceClock& clock, const BarSet& bars);
// The last `keep` bars of each series (what a forecast reads). A folder is read file by
// file, keeping only those, so memory follows the largest file, not the history.
BarSet load_latest_bars(const BarSource& source, size_t keep);

// One line naming the source, e.g. "embedded synthetic data (40000 bars, 2 symbols, seed 7)".
std::string describe_source(const BarSource& source);

}  // namespace qtft::data
