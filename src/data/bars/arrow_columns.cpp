// Arrow columns of any supported type as flat vectors: numbers, timestamps, symbols.
#include <arrow/api.h>
#include <arrow/util/value_parsing.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/bars/detail/arrow_columns.h"

namespace qtft::data {
namespace {

// `valid`, when given, gets each row's validity (a null reads as 0); without it the caller
// has rejected nulls.
template <class ArrowType>
void copy_numeric(const Column& col, std::vector<double>& out, std::vector<uint8_t>* valid) {
  for_each_chunk<arrow::NumericArray<ArrowType>>(col, [&](const auto& a, int64_t offset) {
    for (int64_t i = 0; i < a.length(); ++i) {
      const bool present = !valid || a.IsValid(i);
      if (valid) (*valid)[offset + i] = present;
      out[offset + i] = present ? static_cast<double>(a.Value(i)) : 0.0;
    }
  });
}

}  // namespace

bool copy_numbers(const Column& col, std::vector<double>& out, std::vector<uint8_t>* valid) {
  switch (col.array->type()->id()) {
    case arrow::Type::DOUBLE: copy_numeric<arrow::DoubleType>(col, out, valid); return true;
    case arrow::Type::FLOAT: copy_numeric<arrow::FloatType>(col, out, valid); return true;
    case arrow::Type::INT64: copy_numeric<arrow::Int64Type>(col, out, valid); return true;
    case arrow::Type::INT32: copy_numeric<arrow::Int32Type>(col, out, valid); return true;
    case arrow::Type::INT16: copy_numeric<arrow::Int16Type>(col, out, valid); return true;
    case arrow::Type::INT8: copy_numeric<arrow::Int8Type>(col, out, valid); return true;
    case arrow::Type::UINT64: copy_numeric<arrow::UInt64Type>(col, out, valid); return true;
    case arrow::Type::UINT32: copy_numeric<arrow::UInt32Type>(col, out, valid); return true;
    case arrow::Type::UINT16: copy_numeric<arrow::UInt16Type>(col, out, valid); return true;
    case arrow::Type::UINT8: copy_numeric<arrow::UInt8Type>(col, out, valid); return true;
    default: return false;
  }
}

std::vector<double> numeric_values(const Column& col) {
  col.reject_nulls();
  std::vector<double> out(static_cast<size_t>(col.array->length()));
  if (!copy_numbers(col, out, nullptr)) col.fail("has type " + col.array->type()->ToString() + ", expected a number");
  return out;
}

std::vector<double> bar_values(const Column& col, const std::vector<uint8_t>& future) {
  if (future.empty()) return numeric_values(col);
  const auto n = static_cast<size_t>(col.array->length());
  std::vector<double> out(n);
  std::vector<uint8_t> valid(n);
  if (!copy_numbers(col, out, &valid)) col.fail("has type " + col.array->type()->ToString() + ", expected a number");
  for (size_t r = 0; r < n; ++r) {
    if (!valid[r] && !future[r]) col.fail_at(static_cast<int64_t>(r), "null value");
  }
  return out;
}

std::vector<double> close_values(const Column& col, bool future_rows, std::vector<uint8_t>& future) {
  if (col.array->null_count() == 0) return numeric_values(col);
  if (!future_rows) col.reject_nulls("null value (a row ahead with an empty close is read by forecast only)");
  const auto n = static_cast<size_t>(col.array->length());
  std::vector<double> out(n);
  future.resize(n);
  if (!copy_numbers(col, out, &future)) col.fail("has type " + col.array->type()->ToString() + ", expected a number");
  for (auto& f : future) f = !f;  // copy_numbers wrote validity
  return out;
}

namespace {

int64_t scale_to_ns(const Column& col, int64_t row, int64_t value, int64_t factor) {
  if (value > std::numeric_limits<int64_t>::max() / factor || value < std::numeric_limits<int64_t>::min() / factor) {
    col.fail_at(row, "timestamp " + std::to_string(value) + " is outside the representable range (years 1677 to 2262)");
  }
  return value * factor;
}

int64_t unit_factor(arrow::TimeUnit::type unit) {
  switch (unit) {
    case arrow::TimeUnit::SECOND: return 1'000'000'000;
    case arrow::TimeUnit::MILLI: return 1'000'000;
    case arrow::TimeUnit::MICRO: return 1'000;
    case arrow::TimeUnit::NANO: return 1;
  }
  return 1;
}

template <class ArrayType>
void parse_iso_strings(const Column& col, std::vector<int64_t>& out) {
  auto parser = arrow::TimestampParser::MakeISO8601();
  for_each_chunk<ArrayType>(col, [&](const auto& a, int64_t offset) {
    for (int64_t i = 0; i < a.length(); ++i) {
      auto text = a.GetView(i);
      int64_t ns = 0;
      if (!(*parser)(text.data(), text.size(), arrow::TimeUnit::NANO, &ns)) {
        // Appending (not "'" + string) sidesteps a GCC 12 -Wrestrict false positive.
        std::string message(1, '\'');
        message.append(text);
        // A well-formed date whose year nanoseconds since 1970 cannot hold.
        const bool dated = text.size() >= 5 && text[4] == '-' &&
                           std::all_of(text.begin(), text.begin() + 4, [](char c) { return c >= '0' && c <= '9'; });
        const int year = dated ? std::stoi(std::string(text.substr(0, 4))) : 0;
        if (dated && (year < 1678 || year > 2261)) {
          message.append("' is outside the representable range (years 1677 to 2262)");
        } else {
          message.append("' is not an ISO-8601 timestamp");
        }
        col.fail_at(offset + i, message);
      }
      out[offset + i] = ns;
    }
  });
}

template <class ArrowType>
void epoch_integers(const Column& col, EpochUnit unit, std::vector<int64_t>& out) {
  for_each_chunk<arrow::NumericArray<ArrowType>>(col, [&](const auto& a, int64_t offset) {
    for (int64_t i = 0; i < a.length(); ++i) {
      auto v = static_cast<int64_t>(a.Value(i));
      bool millis = unit == EpochUnit::Milliseconds ||
                    (unit == EpochUnit::Auto && (v >= 100'000'000'000 || v <= -100'000'000'000));
      out[offset + i] = scale_to_ns(col, offset + i, v, millis ? 1'000'000 : 1'000'000'000);
    }
  });
}

}  // namespace

std::vector<int64_t> timestamp_values(const Column& col, EpochUnit unit) {
  col.reject_nulls();
  std::vector<int64_t> out(static_cast<size_t>(col.array->length()));
  const auto& type = *col.array->type();
  switch (type.id()) {
    case arrow::Type::TIMESTAMP: {
      int64_t factor = unit_factor(static_cast<const arrow::TimestampType&>(type).unit());
      for_each_chunk<arrow::TimestampArray>(col, [&](const auto& a, int64_t offset) {
        for (int64_t i = 0; i < a.length(); ++i) {
          out[offset + i] = scale_to_ns(col, offset + i, a.Value(i), factor);
        }
      });
      break;
    }
    case arrow::Type::DATE32:
      for_each_chunk<arrow::Date32Array>(col, [&](const auto& a, int64_t offset) {
        for (int64_t i = 0; i < a.length(); ++i) {
          out[offset + i] = scale_to_ns(col, offset + i, a.Value(i), 86'400'000'000'000);
        }
      });
      break;
    case arrow::Type::DATE64:
      for_each_chunk<arrow::Date64Array>(col, [&](const auto& a, int64_t offset) {
        for (int64_t i = 0; i < a.length(); ++i) {
          out[offset + i] = scale_to_ns(col, offset + i, a.Value(i), 1'000'000);
        }
      });
      break;
    case arrow::Type::STRING: parse_iso_strings<arrow::StringArray>(col, out); break;
    case arrow::Type::LARGE_STRING: parse_iso_strings<arrow::LargeStringArray>(col, out); break;
    case arrow::Type::INT64: epoch_integers<arrow::Int64Type>(col, unit, out); break;
    case arrow::Type::INT32: epoch_integers<arrow::Int32Type>(col, unit, out); break;
    case arrow::Type::UINT32: epoch_integers<arrow::UInt32Type>(col, unit, out); break;
    default:
      col.fail("has type " + type.ToString() +
               ", expected a timestamp, ISO-8601 text, or integer epoch seconds/milliseconds");
  }
  return out;
}

namespace {

class SymbolInterner {
 public:
  explicit SymbolInterner(SymbolCodes& out) : out_(out) {}
  int32_t code(const std::string& name) {
    auto [it, inserted] = index_.try_emplace(name, static_cast<int32_t>(out_.names.size()));
    if (inserted) out_.names.push_back(name);
    return it->second;
  }

 private:
  SymbolCodes& out_;
  std::unordered_map<std::string, int32_t> index_;
};

// A symbol is a name: not empty, and without line breaks or quotes, which in a CSV mean
// an unterminated quote merged rows into one cell.
void check_symbol(const Column& col, int64_t row, std::string_view name) {
  if (name.empty()) col.fail_at(row, "empty symbol (an empty cell is a missing value)");
  if (name.find_first_of("\r\n\"") != std::string_view::npos) {
    std::string shown(name.substr(0, 40));
    for (char& c : shown) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    col.fail_at(row, "symbol '" + shown + (name.size() > 40 ? "...'" : "'") +
                         " holds a line break or quote: is a quote left unterminated?");
  }
}

template <class ArrayType>
void intern_strings(const Column& col, SymbolInterner& interner, std::vector<int32_t>& codes) {
  for_each_chunk<ArrayType>(col, [&](const auto& a, int64_t offset) {
    for (int64_t i = 0; i < a.length(); ++i) {
      check_symbol(col, offset + i, a.GetView(i));
      codes[offset + i] = interner.code(std::string(a.GetView(i)));
    }
  });
}

}  // namespace

SymbolCodes symbol_values(const Column& col) {
  col.reject_nulls();
  SymbolCodes out;
  out.codes.resize(static_cast<size_t>(col.array->length()));
  SymbolInterner interner(out);
  const auto& type = *col.array->type();
  switch (type.id()) {
    case arrow::Type::STRING: intern_strings<arrow::StringArray>(col, interner, out.codes); break;
    case arrow::Type::LARGE_STRING: intern_strings<arrow::LargeStringArray>(col, interner, out.codes); break;
    case arrow::Type::DICTIONARY:
      for_each_chunk<arrow::DictionaryArray>(col, [&](const auto& a, int64_t offset) {
        auto dict = a.dictionary();
        for (int64_t i = 0; i < a.length(); ++i) {
          auto scalar = dict->GetScalar(a.GetValueIndex(i)).ValueOrDie();
          const auto name = scalar->ToString();
          check_symbol(col, offset + i, name);
          out.codes[offset + i] = interner.code(name);
        }
      });
      break;
    case arrow::Type::INT64:
    case arrow::Type::INT32:
    case arrow::Type::INT16:
    case arrow::Type::INT8: {
      auto numbers = numeric_values(col);
      for (size_t i = 0; i < numbers.size(); ++i) {
        out.codes[i] = interner.code(std::to_string(static_cast<int64_t>(numbers[i])));
      }
      break;
    }
    default: col.fail("has type " + type.ToString() + ", expected text or integer symbols");
  }
  return out;
}

const arrow::ChunkedArray* find_column(const arrow::Table& table, const std::string& name) {
  auto column = table.GetColumnByName(name);
  return column ? column.get() : nullptr;
}

}  // namespace qtft::data
