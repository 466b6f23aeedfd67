// `qtft export-int8`: a QAT model as integer weights with their scales, for int8 serving.
// The work is qtft::artifact::export_int8_file's; this file parses flags and prints.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "qtft/artifact/int8_file.h"
#include "qtft/artifact/model_file.h"
#include "qtft/common/format.h"
#include "run_flags.h"

namespace qtft::cli {

void add_export_int8_command(CLI::App& app) {
  struct Flags {
    std::string load_model, output;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("export-int8", "Export a QAT model's weights as integers for int8 serving");
  cmd->add_option("--load-model", flags->load_model, "A QAT model saved by qtft train --use-qat or qtft quantize")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--output", flags->output, "Where to write the int8 model (model.int8.safetensors)")
      ->required()
      ->check(writable_file());
  cmd->callback([flags] {
    const auto& f = *flags;
    const auto model = artifact::load_model_file(f.load_model);
    const auto summary = artifact::export_int8_file(model, f.load_model, f.output);
    const auto source_bytes = std::filesystem::file_size(f.load_model);
    // "3.62x smaller than", or for a model so small that the file's header outweighs its
    // values, "1.08x larger than".
    const auto compared = [&](uint64_t bytes) {
      const double ratio = static_cast<double>(bytes) / static_cast<double>(summary.file_bytes);
      char buf[64];
      std::snprintf(buf, sizeof buf, ratio >= 1.0 ? "%.2fx smaller than" : "%.2fx larger than",
                    ratio >= 1.0 ? ratio : 1.0 / ratio);
      return std::string(buf);
    };
    std::printf("Exported %lld weights (%lld values) as %lld-bit integers; %lld values stay in float\n",
                static_cast<long long>(summary.quantized_tensors), static_cast<long long>(summary.quantized_values),
                static_cast<long long>(model.options.weight_bits()), static_cast<long long>(summary.float_values));
    // The source may hold a training state as well; the float32 weights alone are the fair comparison.
    std::printf("Saved %s: %s, %s the same weights in float32 (%s) and %s %s (%s)\n", f.output.c_str(),
                format_bytes(summary.file_bytes).c_str(), compared(summary.fp32_bytes()).c_str(),
                format_bytes(summary.fp32_bytes()).c_str(), compared(source_bytes).c_str(), f.load_model.c_str(),
                format_bytes(source_bytes).c_str());
  });
}

}  // namespace qtft::cli
