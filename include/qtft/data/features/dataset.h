#pragma once

// Features and windows of a source held compactly, in memory or mapped from a feature store.
// Including it includes the types it is built from (windows, the input schema and its
// fitter, series).
#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qtft/data/features/input_schema.h"
#include "qtft/data/features/schema_fitter.h"
#include "qtft/data/features/series_features.h"
#include "qtft/data/features/windows.h"

namespace qtft::data {

// Features and windows held compactly: one feature matrix per symbol, windows computed on
// demand from per-symbol counts, so millions of bars cost a few floats each.
class Dataset {
 public:
  // Plans the input schema from the bars and fits it (normalization) on the training split.
  static Dataset build(const BarSet& bars, const DatasetOptions& options);
  // Applies a saved schema (evaluation, prediction, fine-tuning on new data).
  static Dataset build(const BarSet& bars, const DatasetOptions& options, const InputSchema& spec);
  // Copies `bytes` bytes at `from`, inside one of the series' views, to `to`.
  using ViewReader = std::function<void(const void* from, size_t bytes, void* to)>;
  // Features held elsewhere (a mapped feature store); `storage` keeps the views valid and
  // `reader`, when given, is how batches copy from them (the store reads its file, so that
  // its pages stay in the page cache instead of the process's resident set).
  // Throws qtft::Error naming `source` when a split has no window.
  static Dataset over(const DatasetOptions& options, InputSchema spec, std::string source,
                      std::vector<SeriesView> series, std::shared_ptr<const void> storage, ViewReader reader = {});

  const DatasetOptions& options() const { return options_; }
  const InputSchema& schema() const { return schema_; }
  const std::string& source() const { return source_; }
  const std::vector<SeriesView>& series() const { return series_; }
  const ReadNotes& notes() const { return notes_; }
  void set_notes(ReadNotes notes) { notes_ = std::move(notes); }
  size_t num_observed() const { return schema_.observed.size(); }
  size_t num_known() const { return schema_.known.size(); }
  size_t num_static() const { return schema_.statics.size(); }
  size_t num_windows(Split split) const;
  // What batches and passes over whole splits use rather than dereferencing the views.
  template <class T>
  void copy(std::span<const T> from, T* to) const {
    if (reader_) {
      reader_(from.data(), from.size_bytes(), to);
    } else {
      std::copy(from.begin(), from.end(), to);
    }
  }
  WindowRef window(Split split, size_t index) const;
  // The index within `split` of series s's first window. A series' windows are consecutive,
  // in order of start: window(split, first_window(split, s) + w) starts w rows after the
  // split's first row of series s.
  size_t first_window(Split split, size_t series) const { return first_window_[static_cast<size_t>(split)][series]; }

 private:
  static Dataset assemble(const BarSet& bars, const DatasetOptions& options, const InputSchema* saved);
  void index_windows();
  void require_a_window_per_split() const;

  DatasetOptions options_;
  InputSchema schema_;
  std::string source_;
  std::vector<SeriesView> series_;
  ReadNotes notes_;
  std::shared_ptr<const void> storage_;
  ViewReader reader_;
  // first_window_[split][s] = index of series s's first window within the split.
  std::array<std::vector<size_t>, 4> first_window_;  // kAllSplits, then Split::All
};

}  // namespace qtft::data
