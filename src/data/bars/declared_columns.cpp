// The declared input columns of a table: reals as numbers, categoricals as level indices,
// nulls and NaN kept as missing for the reader to judge.
#include <arrow/api.h>

#include <cmath>
#include <unordered_map>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/detail/arrow_columns.h"

namespace qtft::data {
namespace {

// A declared categorical column: each value's index in `levels` (a level the column has not
// shown before is added), as a double beside the real columns; nulls allowed as for those.
DeclaredColumn categorical_column(const arrow::Table& table, const std::string& source, const std::string& name,
                                  int64_t first_row, CategoryLevels& levels) {
  DeclaredColumn d{Column{source, name, find_column(table, name), first_row}, {}, {}};
  const auto n = static_cast<size_t>(d.col.array->length());
  d.values.resize(n);
  d.valid.resize(n);
  auto level = [&](int64_t row, std::string_view text) {
    auto it = levels.index.find(std::string(text));
    if (it == levels.index.end()) {
      if (levels.names.size() >= kMaxCategoryLevels) {
        d.col.fail_at(row, "level '" + std::string(text.substr(0, 40)) + "' is one more than the " +
                               std::to_string(kMaxCategoryLevels) +
                               " a categorical input may have: is it a real column? (declare those with --observed, "
                               "--known or --static)");
      }
      it = levels.index.emplace(std::string(text), static_cast<int32_t>(levels.names.size())).first;
      levels.names.emplace_back(text);
    }
    return static_cast<double>(it->second);
  };
  auto texts = [&](const auto& a, int64_t offset) {
    for (int64_t i = 0; i < a.length(); ++i) {
      d.valid[offset + i] = a.IsValid(i);
      if (a.IsValid(i)) d.values[offset + i] = level(offset + i, a.GetView(i));
    }
  };
  const auto& type = *d.col.array->type();
  switch (type.id()) {
    case arrow::Type::STRING: for_each_chunk<arrow::StringArray>(d.col, texts); break;
    case arrow::Type::LARGE_STRING: for_each_chunk<arrow::LargeStringArray>(d.col, texts); break;
    case arrow::Type::DICTIONARY:
      for_each_chunk<arrow::DictionaryArray>(d.col, [&](const auto& a, int64_t offset) {
        // Each dictionary entry's level once per chunk, not once per row.
        std::vector<double> code(static_cast<size_t>(a.dictionary()->length()), -1.0);
        for (int64_t i = 0; i < a.length(); ++i) {
          d.valid[offset + i] = a.IsValid(i);
          if (!a.IsValid(i)) continue;
          double& c = code[static_cast<size_t>(a.GetValueIndex(i))];
          if (c < 0) c = level(offset + i, a.dictionary()->GetScalar(a.GetValueIndex(i)).ValueOrDie()->ToString());
          d.values[offset + i] = c;
        }
      });
      break;
    case arrow::Type::INT64:
    case arrow::Type::INT32:
    case arrow::Type::INT16:
    case arrow::Type::INT8:
    case arrow::Type::UINT32:
    case arrow::Type::UINT16:
    case arrow::Type::UINT8: {
      std::vector<double> numbers(n);
      copy_numbers(d.col, numbers, &d.valid);
      for (size_t r = 0; r < n; ++r) {
        if (d.valid[r]) d.values[r] = level(static_cast<int64_t>(r), std::to_string(static_cast<int64_t>(numbers[r])));
      }
      break;
    }
    default:
      d.col.fail("has type " + type.ToString() + ", expected text, dictionary or integer levels (a categorical input)");
  }
  return d;
}

}  // namespace

DeclaredColumn declared_column(const arrow::Table& table, const std::string& source, const std::string& name,
                               int64_t first_row) {
  DeclaredColumn d{Column{source, name, find_column(table, name), first_row}, {}, {}};
  const auto n = static_cast<size_t>(d.col.array->length());
  d.values.resize(n);
  d.valid.resize(n);
  if (d.col.array->type()->id() == arrow::Type::BOOL) {
    for_each_chunk<arrow::BooleanArray>(d.col, [&](const auto& a, int64_t offset) {
      for (int64_t i = 0; i < a.length(); ++i) {
        d.valid[offset + i] = a.IsValid(i);
        d.values[offset + i] = a.IsValid(i) && a.Value(i) ? 1.0 : 0.0;
      }
    });
  } else if (!copy_numbers(d.col, d.values, &d.valid)) {
    d.col.fail("has type " + d.col.array->type()->ToString() +
               ", expected a number (a real input; text columns are categorical inputs)");
  }
  for (size_t r = 0; r < n; ++r) {
    if (!d.valid[r]) continue;
    if (std::isnan(d.values[r])) {
      d.valid[r] = 0;
    } else if (!std::isfinite(d.values[r])) {
      d.col.fail_at(static_cast<int64_t>(r), "value " + format_number(d.values[r]) + " is not finite");
    }
  }
  return d;
}

std::vector<DeclaredColumn> declared_columns(const arrow::Table& table, const std::string& source,
                                             const InputDeclaration& declared, int64_t first_row,
                                             std::unordered_map<std::string, CategoryLevels>& levels) {
  std::vector<DeclaredColumn> out;
  for (const auto& [reals, categoricals] : {std::pair{&declared.observed, &declared.observed_categorical},
                                            std::pair{&declared.known, &declared.known_categorical},
                                            std::pair{&declared.statics, &declared.static_categorical}}) {
    for (const auto& name : *reals) out.push_back(declared_column(table, source, name, first_row));
    for (const auto& name : *categoricals)
      out.push_back(categorical_column(table, source, name, first_row, levels[name]));
  }
  return out;
}

}  // namespace qtft::data
