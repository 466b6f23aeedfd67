// `qtft diff A B`: compares two safetensors files tensor by tensor, the check behind
// "did quantization, conversion or a resumed run change the weights?". Exits 0 when every
// tensor is bitwise identical and 1 otherwise, like diff(1), so scripts can branch on it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>

#include "commands.h"
#include "exit_code.h"
#include "qtft/common/format.h"
#include "qtft/io/tensor_diff.h"

namespace qtft::cli {
namespace {

// One column for both files: the value once when they agree, "A -> B" when they do not.
std::string pair_text(const std::string& a, const std::string& b, bool in_a, bool in_b) {
  if (!in_a) return b;
  if (!in_b || a == b) return a;
  return a + " -> " + b;
}

std::string diff_text(const io::TensorDiffRow& row) {
  if (std::isnan(row.max_abs_diff)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", row.max_abs_diff);
  return buf;
}

std::string status_text(const io::TensorDiffRow& row) {
  if (!row.in_b) return "only in A";
  if (!row.in_a) return "only in B";
  return row.bitwise_identical ? "identical" : "DIFFERENT";
}

struct Column {
  std::string title;
  std::vector<std::string> cells;
  size_t width() const {
    size_t w = title.size();
    for (const auto& c : cells) w = std::max(w, c.size());
    return w;
  }
};

void print_table(const std::vector<Column>& columns) {
  auto line = [&](auto cell) {
    std::string out;
    for (size_t c = 0; c < columns.size(); ++c) {
      std::string text = cell(columns[c]);
      out += "  " + text + std::string(columns[c].width() - text.size(), ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::cout << out << "\n";
  };
  line([](const Column& c) { return c.title; });
  const size_t rows = columns.empty() ? 0 : columns[0].cells.size();
  for (size_t r = 0; r < rows; ++r) line([r](const Column& c) { return c.cells[r]; });
}

void run_diff(const std::string& path_a, const std::string& path_b, bool verbose) {
  auto a = io::load_tensor_file(path_a);
  auto b = io::load_tensor_file(path_b);
  auto diff = io::diff_tensor_files(a, b);

  std::cout << "A: " << path_a << " (" << a.tensors.size() << " tensors)\n"
            << "B: " << path_b << " (" << b.tensors.size() << " tensors)\n";

  std::vector<Column> columns{{"name", {}}, {"dtype", {}}, {"shape", {}}, {"max abs diff", {}}, {"status", {}}};
  if (verbose) columns.insert(columns.begin() + 4, Column{"elements differing", {}});
  for (const auto& row : diff.rows) {
    if (!verbose && row.bitwise_identical) continue;
    size_t c = 0;
    columns[c++].cells.push_back(row.name);
    columns[c++].cells.push_back(pair_text(row.dtype_a, row.dtype_b, row.in_a, row.in_b));
    columns[c++].cells.push_back(pair_text(format_shape(row.shape_a), format_shape(row.shape_b), row.in_a, row.in_b));
    columns[c++].cells.push_back(diff_text(row));
    if (verbose) {
      std::string count = row.differing_elements < 0 ? "-" : std::to_string(row.differing_elements);
      if (row.max_diff_index >= 0) count += " (largest at flat index " + std::to_string(row.max_diff_index) + ")";
      columns[c++].cells.push_back(count);
    }
    columns[c++].cells.push_back(status_text(row));
  }
  if (!columns[0].cells.empty()) {
    std::cout << "\n";
    print_table(columns);
  }

  if (!diff.metadata_differences.empty()) {
    const size_t n = diff.metadata_differences.size();
    std::cout << "\nmetadata: " << n << (n == 1 ? " key differs" : " keys differ")
              << " (reported only; identity is about tensors):";
    for (const auto& key : diff.metadata_differences) std::cout << " " << key;
    std::cout << "\n";
    if (verbose) {
      for (const auto& key : diff.metadata_differences) {
        auto x = a.metadata.find(key), y = b.metadata.find(key);
        std::cout << "  " << key << "\n    A: " << (x == a.metadata.end() ? "(absent)" : x->second)
                  << "\n    B: " << (y == b.metadata.end() ? "(absent)" : y->second) << "\n";
      }
    }
  }

  const size_t total = diff.rows.size(), differing = diff.differing_tensors();
  std::cout << "\n";
  if (diff.identical()) {
    std::cout << "all " << total << " tensors bitwise identical\n";
    return;
  }
  std::cout << differing << " of " << total << " tensors differ\n";
  std::cout.flush();
  throw ExitCode{1};
}

}  // namespace

void add_diff_command(CLI::App& app) {
  auto path_a = std::make_shared<std::string>();
  auto path_b = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "diff", "Compare two safetensors files tensor by tensor; exit 0 if all are bitwise identical, 1 if not");
  cmd->add_option("a", *path_a, "The first .safetensors file")->required()->check(CLI::ExistingFile);
  cmd->add_option("b", *path_b, "The second .safetensors file")->required()->check(CLI::ExistingFile);
  cmd->add_flag("--verbose,-v", *verbose,
                "List every tensor, not only those that differ, with the number of differing elements, "
                "and print differing metadata values");
  cmd->callback([path_a, path_b, verbose] { run_diff(*path_a, *path_b, *verbose); });
}

}  // namespace qtft::cli
