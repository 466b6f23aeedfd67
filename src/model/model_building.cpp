#include "qtft/model/model_building.h"

#include "qtft/memory/rng_state.h"

namespace qtft::model {

namespace {

// The embedding rows of each categorical input of a kind, which follow its reals.
std::vector<int64_t> categories_of(const std::vector<data::SchemaInput>& inputs) {
  std::vector<int64_t> rows;
  for (const auto& f : inputs) {
    if (f.categorical) rows.push_back(f.categories());
  }
  return rows;
}

}  // namespace

TftOptions model_options_for(const data::Dataset& dataset) {
  const auto& spec = dataset.schema();
  TftOptions options(static_cast<int64_t>(dataset.num_observed()), static_cast<int64_t>(dataset.num_known()),
                     static_cast<int64_t>(spec.symbols.size()), dataset.options().encoder_length,
                     dataset.options().horizon);
  options.num_static(static_cast<int64_t>(dataset.num_static()))
      .observed_categories(categories_of(spec.observed))
      .known_categories(categories_of(spec.known))
      .static_categories(categories_of(spec.statics));
  return options;
}

TftOptions model_options_for(const data::Dataset& dataset, const Architecture& architecture, bool use_qat,
                             int64_t weight_bits, int64_t activation_bits) {
  TftOptions options = model_options_for(dataset);
  architecture.apply_to(options);
  if (architecture.variable_hidden_size == 0) {
    options.variable_hidden_size(
        default_variable_hidden_size(options.hidden_size(), options.num_observed() + options.num_known()));
  }
  options.use_qat(use_qat).weight_bits(weight_bits).activation_bits(activation_bits);
  options.validate();
  return options;
}

TemporalFusionTransformer build_model(const TftOptions& options, uint64_t seed) {
  options.validate();
  TemporalFusionTransformer model{nullptr};
  memory::RandomStream(seed).run([&] { model = TemporalFusionTransformer(options); });
  return model;
}

int64_t count_parameters(const torch::nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

}  // namespace qtft::model
