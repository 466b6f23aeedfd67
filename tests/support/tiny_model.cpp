#include "support/tiny_model.h"

#include <cmath>

#include "qtft/artifact/model_loading.h"
#include "qtft/model/model_building.h"

#include "support/bar_files.h"

namespace qtft::test {

data::Dataset tiny_dataset() {
  static const auto bars = regular_bar_set(301, 2);
  data::DatasetOptions o;
  o.encoder_length = 12;
  o.horizon = 3;
  return data::Dataset::build(bars, o);
}

data::Dataset tiny_declared_dataset() {
  static const auto bars = [] {
    auto b = regular_bar_set(301, 2);
    b.declared.observed = {"flow"};
    b.declared.observed_categorical = {"phase"};
    b.declared.known_categorical = {"session"};
    b.declared.statics = {"tick"};
    b.declared.static_categorical = {"sector"};
    for (size_t k = 0; k < b.series.size(); ++k) {
      auto& s = b.series[k];
      const size_t n = s.size();
      std::vector<double> flow(n), phase(n), session(n);
      for (size_t i = 0; i < n; ++i) {
        flow[i] = std::sin(0.1 * static_cast<double>(i + k));
        phase[i] = static_cast<double>(i % 3);
        session[i] = static_cast<double>((i / 5) % 2);
      }
      s.declared_observed = {flow, phase};
      s.observed_levels = {{}, {"a", "b", "c"}};
      s.declared_known = {session};
      s.known_levels = {{"am", "pm"}};
      s.declared_static = {std::vector<double>(n, 0.25 * static_cast<double>(k + 1)), std::vector<double>(n, 0.0)};
      s.static_levels = {{}, {k == 0 ? "x" : "y"}};
    }
    return b;
  }();
  data::DatasetOptions o;
  o.encoder_length = 12;
  o.horizon = 3;
  return data::Dataset::build(bars, o);
}

model::TftOptions tiny_model_options(const data::Dataset& d) {
  return model::model_options_for(d).hidden_size(8).attention_heads(2).dropout(0.1);
}

train::TrainOptions tiny_train_options() {
  train::TrainOptions o;
  o.epochs = 3;
  o.batch_size = 16;
  o.max_batches_per_epoch = 6;
  o.learning_rate = 3e-3;
  o.eval_batch_size = 64;
  return o;
}

}  // namespace qtft::test
