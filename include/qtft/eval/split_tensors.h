#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <vector>

#include "qtft/data/features/batch.h"
#include "qtft/model/tft.h"

namespace qtft::eval {

// Every window of an evaluation as the model took it and answered: the inputs (named as
// model/model_inputs.h), the scaled target and the model's scaled quantiles. Fed batch by
// batch from evaluate_for_desk's visitor; `qtft evaluate --save-inputs` writes it, so that
// another runtime (an ONNX export) can be checked on a whole split. Holds the split in
// memory.
class SplitTensors {
 public:
  void add(const data::Batch& batch, const model::TftOutput& output);
  // observed.npy, known.npy, symbol.npy, statics.npy (when the model has statics),
  // target.npy [N, H] and quantiles.npy [N, H, Q] in `folder`, which must exist; returns the
  // files written. Throws qtft::Error when no window was added.
  std::vector<std::filesystem::path> save(const std::filesystem::path& folder) const;

 private:
  std::vector<at::Tensor> observed_, known_, symbol_, statics_, target_, quantiles_;
};

}  // namespace qtft::eval
