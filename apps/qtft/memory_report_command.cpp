// `qtft memory-report`: what one training step holds, without checkpointing and with a
// policy, measured on the first batch `qtft train` would take with the same flags.
#include <ATen/Parallel.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "data_flags.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/error.h"
#include "qtft/data/features/batch.h"
#include "qtft/data/features/batch_order.h"
#include "qtft/memory/checkpoint_policy.h"
#include "qtft/memory/device_settings.h"
#include "qtft/model/model_building.h"
#include "qtft/train/step_memory.h"
#include "qtft/train/train_step.h"
#include "run_flags.h"

namespace qtft::cli {
namespace {

struct MemoryReportFlags {
  DataFlags data;
  ModelFlags model;
  QatFlags qat;
  RuntimeFlags runtime;
  train::TrainOptions train;
  std::string lr_schedule = "plateau";
  std::string checkpoint_policy = "blocks";
  int timed_steps = 3;
  bool json = false;
};

memory::CheckpointPolicy policy_to_compare(const std::string& name) {
  auto policy = memory::parse_checkpoint_policy(name);
  if (policy == memory::CheckpointPolicy::None || policy == memory::CheckpointPolicy::Auto) {
    throw UsageError(
        "--checkpoint-policy must be blocks or lstm here (the report compares it against none; auto "
        "chooses a policy during training), got '" +
        name + "'");
  }
  return policy;
}

// The first batch of epoch 1, in the shuffled order the trainer visits with this seed.
nlohmann::json config_json(const model::TftOptions& m, int64_t batch, int64_t parameters, c10::Device device,
                           int timed_steps, const std::string& data) {
  return {{"encoder_length", m.encoder_length()},
          {"horizon", m.horizon()},
          {"hidden_size", m.hidden_size()},
          {"attention_heads", m.attention_heads()},
          {"lstm_layers", m.lstm_layers()},
          {"batch_size", batch},
          {"parameters", parameters},
          {"use_qat", m.use_qat()},
          {"weight_bits", m.weight_bits()},
          {"activation_bits", m.activation_bits()},
          {"device", device.str()},
          {"device_description", memory::describe_device(device)},
          {"gpu_memory_limit_bytes", memory::gpu_memory_limit(device)},
          {"deterministic", memory::deterministic_algorithms_in_use()},
          {"threads", at::get_num_threads()},
          {"timed_steps", timed_steps},
          {"data", data}};
}

void run_memory_report(MemoryReportFlags& f) {
  finish_data_flags(f.data);
  f.runtime.apply();
  f.train.lr_schedule = train::parse_lr_schedule(f.lr_schedule);
  f.train.precision = f.runtime.precision_or();
  f.train.validate();
  const auto policy = policy_to_compare(f.checkpoint_policy);
  if (f.timed_steps < 1) throw UsageError("--timed-steps must be at least 1, got " + std::to_string(f.timed_steps));
  auto device = f.runtime.resolve_device();

  const auto& source = f.data.source;
  if (source.uses_embedded_data() && !f.json) {
    std::cout << "No --parquet-file or --csv-file given: measuring on the " << data::describe_source(source) << "\n";
  }
  auto dataset = data::open_dataset(source, f.data.dataset, nullptr, data::StoreAccess::BuildIfNeeded, print_store);
  const auto options =
      model::model_options_for(dataset, f.model, f.qat.use_qat, f.qat.weight_bits, f.qat.activation_bits);
  auto batch = train::first_training_batch(dataset, f.train);
  const int64_t parameters = model::count_parameters(*model::TemporalFusionTransformer(options));
  auto config = config_json(options, batch.size(), parameters, device, f.timed_steps, data::describe_source(source));

  if (!f.json) {
    std::printf(
        "Measuring one training step: encoder %lld, horizon %lld, hidden %lld, heads %lld, batch %lld, "
        "%lld parameters, QAT %s, device %s, %d threads; step time is the median of %d steps\n",
        static_cast<long long>(options.encoder_length()), static_cast<long long>(options.horizon()),
        static_cast<long long>(options.hidden_size()), static_cast<long long>(options.attention_heads()),
        static_cast<long long>(batch.size()), static_cast<long long>(parameters),
        options.use_qat() ? ("on (" + std::to_string(options.weight_bits()) + "-bit weights, " +
                             std::to_string(options.activation_bits()) + "-bit activations)")
                                .c_str()
                          : "off",
        memory::describe_device(device).c_str(), at::get_num_threads(), f.timed_steps);
    std::fflush(stdout);
  }
  auto report = train::measure_memory_report(options, f.train.seed, batch, f.train, policy, device, f.timed_steps);
  if (f.json) {
    auto j = train::to_json(report);
    j["config"] = config;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "\n" << train::format_memory_report(report);
  }
}

}  // namespace

void add_memory_report_command(CLI::App& app) {
  auto flags = std::make_shared<MemoryReportFlags>();
  auto* cmd = app.add_subcommand("memory-report",
                                 "Memory of one training step without and with activation checkpointing, measured");
  add_bar_source_flags(*cmd, flags->data);
  add_input_flags(*cmd, flags->data);
  add_window_flags(*cmd, flags->data);
  add_model_flags(*cmd, flags->model);
  cmd->add_flag("--use-qat", flags->qat.use_qat, "Quantization-aware training: fake-quantized weights and activations");
  cmd->add_option("--weight-bits", flags->qat.weight_bits, "Weight bit width: 8 or 4")->capture_default_str();
  cmd->add_option("--activation-bits", flags->qat.activation_bits, kActivationBitsHelp)->capture_default_str();
  add_training_flags(*cmd, flags->train, flags->lr_schedule);
  add_runtime_flags(*cmd, flags->runtime);
  add_precision_flag(*cmd, flags->runtime);
  cmd->add_option("--checkpoint-policy", flags->checkpoint_policy, "The policy to compare against none: blocks or lstm")
      ->capture_default_str();
  cmd->add_option("--timed-steps", flags->timed_steps, "Steps timed per column (the median is reported)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the report as JSON instead of the table");
  cmd->callback([flags] { run_memory_report(*flags); });
}

}  // namespace qtft::cli
