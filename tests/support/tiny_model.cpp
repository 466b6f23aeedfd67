#include "support/tiny_model.h"

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
