// `qtft quantize`: post-training quantization. Calibrates the observers of a trained FP32
// model on training batches, freezes them, and reports what the simulated int8 model loses.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "model_run.h"
#include "qtft/artifact/model_file.h"
#include "qtft/common/error.h"
#include "qtft/eval/evaluate.h"
#include "qtft/quant/observers.h"
#include "qtft/train/workflow.h"
#include "run_flags.h"

namespace qtft::cli {

void add_quantize_command(CLI::App& app) {
  struct Flags {
    ModelRunFlags run;
    QatFlags qat;
    std::string save_model;
    uint64_t seed = 42;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("quantize", "Post-training quantization: calibrate and freeze observers of a model");
  // The validation split by default: the test split stays untouched for later.
  flags->run.split = "validation";
  add_model_run_flags(*cmd, flags->run);
  cmd->add_option("--calibration-batches", flags->qat.calibration_batches, "Training batches to calibrate on")
      ->capture_default_str();
  cmd->add_option("--weight-bits", flags->qat.weight_bits, "Weight bit width: 8 or 4")->capture_default_str();
  cmd->add_option("--activation-bits", flags->qat.activation_bits, kActivationBitsHelp)->capture_default_str();
  cmd->add_flag("--verbose", flags->qat.verbose, "List every observer");
  cmd->add_option("--seed", flags->seed, "Seed of the calibration batch order")->capture_default_str();
  cmd->add_option("--save-model", flags->save_model, "Where to write the quantized model")
      ->required()
      ->check(writable_file());
  cmd->callback([flags] {
    auto& f = *flags;
    if (f.qat.calibration_batches < 1) throw UsageError("--calibration-batches must be at least 1");
    auto run = open_model_run(f.run);
    auto& loaded = run.loaded;
    auto fp32 = eval::evaluate_model(loaded.model, run.dataset, run.split, f.run.batch_size, run.device);
    artifact::convert_to_qat(loaded, f.qat.weight_bits, f.qat.activation_bits, run.device);
    if (quant::observers_frozen(*loaded.model)) {
      throw Error(f.run.load_model + ": its observers are already frozen; quantize the FP32 model instead");
    }
    std::printf("Starting QAT calibration (%lld batches)...\n", static_cast<long long>(f.qat.calibration_batches));
    std::fflush(stdout);
    auto coverage = train::post_training_quantize(loaded.model, run.dataset, f.qat.calibration_batches,
                                                  f.run.batch_size, f.seed, run.device);
    std::printf("Calibration complete\nObserver statistics:\n%s%s",
                quant::format_observer_table(quant::observer_stats(*loaded.model), f.qat.verbose ? 0 : 12).c_str(),
                data::format_regime_coverage(coverage).c_str());
    auto ptq = eval::evaluate_model(loaded.model, run.dataset, run.split, f.run.batch_size, run.device);
    std::printf(
        "Loss on the %s split: source model %.5f, quantized (%lld-bit weights, %lld-bit activations) %.5f (%+.2f%%)\n",
        data::split_name(run.split), fp32.loss, static_cast<long long>(f.qat.weight_bits),
        static_cast<long long>(f.qat.activation_bits), ptq.loss, 100.0 * (ptq.loss - fp32.loss) / fp32.loss);
    artifact::ModelFile out{loaded.model->options(), loaded.file.features, loaded.file.dataset,
                            artifact::named_weights(*loaded.model), std::nullopt};
    artifact::save_model_file(f.save_model, out);
    std::printf("Saved %s\n", f.save_model.c_str());
  });
}

}  // namespace qtft::cli
