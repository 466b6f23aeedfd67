// `qtft export-onnx`: a model file as an ONNX graph for serving stacks that speak ONNX.
// The work is qtft::onnx_export::export_onnx's; this file parses flags and prints.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "qtft/common/format.h"
#include "qtft/onnx/onnx_export.h"

namespace qtft::cli {

void add_export_onnx_command(CLI::App& app) {
  struct Flags {
    std::string load_model, output;
    bool int8 = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("export-onnx", "Export a model (FP32, QAT or int8) as an ONNX graph");
  cmd->add_option("--load-model", flags->load_model, "A model saved by qtft train, quantize or export-int8")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--output", flags->output, "Where to write the graph (model.onnx)")->required();
  cmd->add_flag("--int8", flags->int8,
                "Export the quantized (QDQ) graph; QAT and int8 files export as QDQ anyway, FP32 files cannot");
  cmd->callback([flags] {
    const auto& f = *flags;
    const auto summary = onnx_export::export_onnx(f.load_model, f.output, {f.int8});
    std::printf("Exported %s (%s) as %s ONNX graph at opset %lld: %lld nodes\n", f.load_model.c_str(),
                summary.model_kind.c_str(), summary.qdq ? "a QDQ" : "a float",
                static_cast<long long>(onnx_export::kOpset), static_cast<long long>(summary.nodes));
    if (summary.qdq) {
      std::printf(
          "QDQ: %lld activations quantized, %lld products and %lld embedding tables in int8; %lld weights stay "
          "float (the LSTMs', and the products whose input is not an observer's)\n",
          static_cast<long long>(summary.quantized_activations), static_cast<long long>(summary.int8_products),
          static_cast<long long>(summary.int8_tables), static_cast<long long>(summary.float_weights));
    }
    std::printf("Saved %s (%s)\n", f.output.c_str(), format_bytes(summary.file_bytes).c_str());
  });
}

}  // namespace qtft::cli
