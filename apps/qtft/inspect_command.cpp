#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "qtft/common/format.h"
#include "qtft/io/safetensors.h"

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
    std::cout << "\nmetadata (" << file.metadata().size() << " entries):\n";
    for (const auto& [key, value] : file.metadata()) {
      std::cout << "  " << key << ": " << readable_value(value) << "\n";
    }
  });
}

}  // namespace qtft::cli
