#include "qtft/eval/split_tensors.h"

#include <ATen/ops/cat.h>

#include <string>
#include <utility>

#include "qtft/common/error.h"
#include "qtft/io/npy_file.h"
#include "qtft/model/model_inputs.h"

namespace qtft::eval {

void SplitTensors::add(const data::Batch& batch, const model::TftOutput& output) {
  observed_.push_back(batch.observed.cpu());
  known_.push_back(batch.known.cpu());
  symbol_.push_back(batch.symbol.cpu());
  statics_.push_back(batch.statics.cpu());
  target_.push_back(batch.target.cpu());
  quantiles_.push_back(output.quantiles.detach().cpu());
}

std::vector<std::filesystem::path> SplitTensors::save(const std::filesystem::path& folder) const {
  if (observed_.empty()) throw Error(folder.string() + ": no windows were evaluated, so there are no inputs to save");
  std::vector<std::pair<std::string, const std::vector<at::Tensor>*>> tensors{
      {model::kObservedInput, &observed_}, {model::kKnownInput, &known_}, {model::kSymbolInput, &symbol_}};
  if (statics_.front().size(-1) > 0) tensors.emplace_back(model::kStaticsInput, &statics_);
  tensors.emplace_back("target", &target_);
  tensors.emplace_back("quantiles", &quantiles_);
  std::vector<std::filesystem::path> written;
  for (const auto& [name, parts] : tensors) {
    written.push_back(folder / (name + ".npy"));
    io::save_npy(written.back(), at::cat(*parts));
  }
  return written;
}

}  // namespace qtft::eval
