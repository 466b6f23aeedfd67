#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "qtft/artifact/model_loading.h"
#include "qtft/common/format.h"
#include "qtft/io/safetensors.h"
#include "qtft/model/model_building.h"
#include "qtft/quant/observers.h"

namespace qtft::cli {
namespace {

// Metadata values are often JSON (config, statistics); indent those for reading.
std::string readable_value(const std::string& value) {
  auto json = nlohmann::json::parse(value, nullptr, false);
  if (json.is_discarded() || !json.is_structured()) return value;
  std::string pretty = json.dump(2);
  std::string out;
  for (char c : pretty) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

template <class T>
T scalar_of(const io::SafetensorsFile& file, const std::string& name) {
  const auto* entry = file.find(name);
  if (!entry || entry->numel() != 1) return T{};
  auto bytes = file.bytes_of(*entry);
  T value{};
  if (bytes.size() == sizeof(T)) std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

// QAT observers are saved as buffers "<path>_quant.{scale,zero_point,samples,...}";
// show them as the table training prints.
void print_observers(const io::SafetensorsFile& file) {
  const std::string suffix = "_quant.scale";
  std::vector<quant::ObserverStats> stats;
  for (const auto& t : file.tensors()) {
    // The model's own observers; a checkpoint's "resume." copy would list them twice.
    if (t.name.rfind("resume.", 0) == 0) continue;
    if (t.name.size() <= suffix.size() || t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    std::string path = t.name.substr(0, t.name.size() - std::string(".scale").size());
    quant::ObserverStats s;
    s.name = quant::observer_name(path.rfind("model.", 0) == 0 ? path.substr(6) : path);
    s.scale = scalar_of<float>(file, path + ".scale");
    s.zero_point = scalar_of<int32_t>(file, path + ".zero_point");
    s.samples = scalar_of<int64_t>(file, path + ".samples");
    s.frozen = scalar_of<uint8_t>(file, path + ".frozen") != 0;
    stats.push_back(s);
  }
  if (stats.empty()) return;
  std::cout << "\nQAT observers (" << stats.size() << "):\n" << quant::format_observer_table(stats);
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("inspect", "List the tensors and metadata of a safetensors file");
  cmd->add_option("file", *path, "A .safetensors file")->required()->check(CLI::ExistingFile);
  cmd->callback([path] {
    auto file = io::SafetensorsFile::read(*path);
    uint64_t bytes = 0;
    size_t width = 4;
    for (const auto& t : file.tensors()) {
      bytes += t.end - t.begin;
      width = std::max(width, t.name.size());
    }
    std::cout << *path << ": " << file.tensors().size() << " tensors, " << format_bytes(bytes) << "\n\n";
    std::printf("  %-*s  %-5s  %s\n", static_cast<int>(width), "name", "dtype", "shape");
    for (const auto& t : file.tensors()) {
      std::printf("  %-*s  %-5s  %s\n", static_cast<int>(width), t.name.c_str(),
                  std::string(io::dtype_name(t.dtype)).c_str(), format_shape(t.shape).c_str());
    }
    print_observers(file);
    std::cout << "\nmetadata (" << file.metadata().size() << " entries):\n";
    for (const auto& [key, value] : file.metadata()) {
      std::cout << "  " << key << ": " << readable_value(value) << "\n";
    }
    if (file.metadata().count("qtft.format")) {
      // A qtft model file is checked as every command that loads it checks it.
      std::cout.flush();
      auto loaded = artifact::load_model(*path, c10::Device(c10::kCPU));
      std::cout << "\nqtft model: configuration, features and weights are consistent ("
                << (loaded.file.int8_weights        ? "int8 export of a QAT model"
                    : loaded.file.options.use_qat() ? "QAT"
                                                    : "FP32")
                << ", " << model::count_parameters(*loaded.model) << " parameters)\n";
    }
  });
}

}  // namespace qtft::cli
