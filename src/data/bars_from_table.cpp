// The Arrow edge of the bar reader: Arrow columns of any supported type become flat
// vectors, then one pass in file order validates every row and groups rows by symbol.
#include <arrow/api.h>
#include <arrow/util/value_parsing.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_map>

#include "qtft/common/error.h"
#include "qtft/common/format.h"
#include "qtft/data/arrow_bars.h"

namespace qtft::data {
namespace {

constexpr double kMinPrice = 1e-300;

struct Column {
  std::string source;
  std::string name;
  const arrow::ChunkedArray* array = nullptr;
  int64_t first_row = 0;  // the table's first row in the file (a batch of a larger file)

  [[noreturn]] void fail_at(int64_t row, const std::string& what) const {
    throw Error(source + ": column '" + name + "', row " + std::to_string(first_row + row + 1) + ": " + what);
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(source + ": column '" + name + "': " + what); }
  void reject_nulls(const std::string& what = "null value") const {
    int64_t offset = 0;
    for (const auto& chunk : array->chunks()) {
      if (chunk->null_count() > 0) {
        for (int64_t i = 0; i < chunk->length(); ++i) {
          if (chunk->IsNull(i)) fail_at(offset + i, what);
        }
      }
      offset += chunk->length();
    }
  }
};

// Calls f(values_array, row_offset) for each chunk cast to its concrete Arrow array type.
template <class ArrayType, class F>
void for_each_chunk(const Column& col, F&& f) {
  int64_t offset = 0;
  for (const auto& chunk : col.array->chunks()) {
    f(static_cast<const ArrayType&>(*chunk), offset);
    offset += chunk->length();
  }
}

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

// Any integer or floating column as doubles; false for other types.
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

// A bar column whose cells in future rows (`future`, empty when there are none) are not read.
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

// The close, and which rows are future rows (an empty close) when the reader takes them.
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

// Symbols become small integer codes (in order of first appearance) plus their names.
struct SymbolCodes {
  std::vector<int32_t> codes;
  std::vector<std::string> names;
};

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

// A declared input column: numbers, nulls allowed (the reader decides what they mean). A
// NaN is missing as a null is: pandas and numpy write a missing number as NaN (a return's
// first difference), and a warm-up of NaN is a warm-up. An infinity is an error.
struct DeclaredColumn {
  Column col;
  std::vector<double> values;
  std::vector<uint8_t> valid;
};

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

// The declared columns of every kind in the order bars hold them: observed, known, static,
// each kind's reals then its categoricals. `levels` gets each categorical column's levels.
std::vector<DeclaredColumn> declared_columns(const arrow::Table& table, const std::string& source,
                                             const DeclaredColumns& declared, int64_t first_row,
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

// Where each series stands with its declared inputs: still in the warm-up of nulls (its bars
// dropped), or begun at a row, with the last values for forward-fill.
struct DeclaredState {
  bool begun = false;
  int64_t first_row = -1;  // -1: begun in an earlier part of the source
  std::vector<double> last;
};

std::string column_list(const arrow::Table& table) {
  std::string out;
  for (const auto& f : table.schema()->fields()) out += (out.empty() ? "" : ", ") + f->name();
  return out;
}

}  // namespace

DeclaredColumns resolve_declared_inputs(const arrow::Schema& schema, const BarReadOptions& options,
                                        const std::string& source) {
  const auto& names = options.columns;
  std::vector<std::string> columns;
  for (const auto& f : schema.fields()) columns.push_back(f->name());
  // The close column as bars_from_table picks it: 'price' stands in for an absent 'close'.
  const bool price = names.close == "close" && !schema.GetFieldByName("close") && schema.GetFieldByName("price");
  return resolve_inputs(options.inputs, columns,
                        {names.open, names.high, names.low, price ? "price" : names.close, names.volume},
                        {names.timestamp, names.symbol}, source);
}

BarSet bars_from_table(const arrow::Table& table, const std::string& source, const BarReadOptions& options,
                       DeclaredCarry* carry, int64_t first_row) {
  const auto& names = options.columns;
  if (table.num_rows() == 0) throw Error(source + ": the file holds no rows");
  // Arrow finds no column by a name that two columns share; say so rather than "missing".
  for (const auto& field : table.schema()->fields()) {
    const auto count = table.schema()->GetAllFieldIndices(field->name()).size();
    if (count > 1) {
      throw Error(source + ": has " + std::to_string(count) + " columns named '" + field->name() +
                  "'; rename all but one");
    }
  }
  auto require = [&](const std::string& name, const std::string& role) {
    const auto* col = find_column(table, name);
    if (!col) {
      throw Error(source + ": missing " + role + " column '" + name + "' (columns: " + column_list(table) + ")");
    }
    return Column{source, name, col, first_row};
  };
  auto optional = [&](const std::string& name) { return Column{source, name, find_column(table, name), first_row}; };

  Column ts_col = require(names.timestamp, "timestamp");
  Column close_col = optional(names.close);
  if (!close_col.array && names.close == "close") close_col = optional("price");
  if (!close_col.array) close_col = require(names.close, "close (or price)");
  Column open_col = optional(names.open), high_col = optional(names.high), low_col = optional(names.low),
         volume_col = optional(names.volume), symbol_col = optional(names.symbol);

  int range_columns = !!open_col.array + !!high_col.array + !!low_col.array;
  if (range_columns != 0 && range_columns != 3) {
    throw Error(source + ": has only some of the columns '" + names.open + "', '" + names.high + "', '" + names.low +
                "'; give all three or none (close-only data)");
  }

  BarSet bars;
  bars.source = source;
  if (range_columns == 3) bars.fields.add(BarField::OpenHighLow);
  if (volume_col.array != nullptr) bars.fields.add(BarField::Volume);
  bars.declared = resolve_declared_inputs(*table.schema(), options, source);
  // A source read in parts keeps its levels in the carry: a level has one index in every part.
  std::unordered_map<std::string, CategoryLevels> own_levels;
  auto& levels = carry ? carry->levels : own_levels;
  const auto declared = declared_columns(table, source, bars.declared, first_row, levels);
  const size_t n_observed = bars.declared.observed.size() + bars.declared.observed_categorical.size();
  const size_t n_known = bars.declared.known.size() + bars.declared.known_categorical.size();
  const size_t first_static = n_observed + n_known;
  const auto& target_declaration = bars.declared.target;
  std::optional<DeclaredColumn> target;  // another column than the close
  if (!target_declaration.column.empty()) target = declared_column(table, source, target_declaration.column, first_row);

  auto ts = timestamp_values(ts_col, options.epoch_unit);
  std::vector<uint8_t> future;  // per row: a future row (empty close); empty when none is
  auto close = close_values(close_col, options.future_rows, future);
  std::vector<double> open, high, low, volume;
  if (bars.fields.has(BarField::OpenHighLow)) {
    open = bar_values(open_col, future);
    high = bar_values(high_col, future);
    low = bar_values(low_col, future);
  }
  if (bars.fields.has(BarField::Volume)) volume = bar_values(volume_col, future);
  SymbolCodes symbols;
  if (symbol_col.array) {
    if (!options.symbol.empty()) {
      throw Error(source + ": has a symbol column '" + names.symbol + "'; --symbol " + options.symbol +
                  " names the series of files without one");
    }
    symbols = symbol_values(symbol_col);
  } else {
    symbols.codes.assign(close.size(), 0);
    symbols.names.push_back(options.symbol.empty() ? std::filesystem::path(source).stem().string() : options.symbol);
  }

  bars.series.resize(symbols.names.size());
  {
    // Each series' size up front: growing millions of bars by doubling copies them twice over.
    std::vector<size_t> rows(symbols.names.size(), 0);
    for (int32_t code : symbols.codes) ++rows[static_cast<size_t>(code)];
    for (size_t s = 0; s < symbols.names.size(); ++s) {
      auto& series = bars.series[s];
      series.symbol = symbols.names[s];
      series.timestamp_ns.reserve(rows[s]);
      series.close.reserve(rows[s]);
      if (bars.fields.has(BarField::OpenHighLow)) {
        series.open.reserve(rows[s]);
        series.high.reserve(rows[s]);
        series.low.reserve(rows[s]);
      }
      if (bars.fields.has(BarField::Volume)) series.volume.reserve(rows[s]);
      series.declared_observed.resize(n_observed);
      for (auto& column : series.declared_observed) column.reserve(rows[s]);
      if (target) series.target_values.reserve(rows[s]);
      series.declared_known.resize(n_known);
      for (auto& column : series.declared_known) column.reserve(rows[s]);
      series.declared_static.resize(declared.size() - first_static);
      for (auto& column : series.declared_static) column.reserve(rows[s]);
    }
  }
  std::vector<int64_t> last_row(symbols.names.size(), -1);
  std::vector<DeclaredState> state(symbols.names.size());
  if (carry) {
    for (size_t s = 0; s < symbols.names.size(); ++s) {
      auto it = carry->last.find(symbols.names[s]);
      if (it != carry->last.end() && it->second.size() == declared.size()) state[s] = {true, -1, it->second};
    }
  }
  const bool forward_fill = bars.declared.missing == MissingValues::ForwardFill;
  auto has_null = [&](size_t r) {
    return (target && !target->valid[r]) ||
           std::any_of(declared.begin(), declared.end(), [&](const DeclaredColumn& d) { return !d.valid[r]; });
  };
  const bool warm_up = !declared.empty() || target;

  auto check_price = [](const Column& col, int64_t row, double v) {
    if (!std::isfinite(v)) col.fail_at(row, "value " + format_number(v) + " is not finite");
    if (v <= 0) col.fail_at(row, "price " + format_number(v) + " is not positive");
    // Below about 1e-300 the returns and ranges computed from a price overflow or lose
    // all precision: no market quotes such a price, so it is a corrupt value.
    if (v < kMinPrice) col.fail_at(row, "price " + format_number(v) + " is too small to be a price (below 1e-300)");
  };
  std::vector<int64_t> first_future_row(symbols.names.size(), -1);
  for (int64_t row = 0; row < static_cast<int64_t>(close.size()); ++row) {
    auto r = static_cast<size_t>(row);
    auto code = static_cast<size_t>(symbols.codes[r]);
    auto& series = bars.series[code];
    if (!future.empty() && future[r]) {
      // A bar ahead: its time and the known inputs there, nothing of its prices.
      for (size_t c = n_observed; c < first_static; ++c) {
        if (!declared[c].valid[r]) {
          declared[c].col.fail_at(row,
                                  "empty in a future row of symbol '" + series.symbol +
                                      "' (its close is empty): a forecast needs the known inputs of the bars ahead");
        }
      }
      const bool after_future = !series.future_timestamp_ns.empty();
      if (after_future || last_row[code] >= 0) {
        const int64_t prev = after_future ? series.future_timestamp_ns.back() : series.timestamp_ns.back();
        if (ts[r] <= prev) {
          ts_col.fail_at(row,
                         "future row of symbol '" + series.symbol + "' at " + format_utc(ts[r]) + " is not after " +
                             format_utc(prev) + ", row " +
                             std::to_string(first_row + (after_future ? first_future_row[code] : last_row[code]) + 1));
        }
      }
      if (!after_future) first_future_row[code] = row;
      series.future_timestamp_ns.push_back(ts[r]);
      series.future_known.resize(n_known);
      for (size_t c = n_observed; c < first_static; ++c)
        series.future_known[c - n_observed].push_back(declared[c].values[r]);
      continue;
    }
    if (first_future_row[code] >= 0) {
      close_col.fail_at(row, "a bar of symbol '" + series.symbol + "' after its future rows (row " +
                                 std::to_string(first_row + first_future_row[code] + 1) +
                                 " has an empty close): future rows come after the last bar");
    }
    check_price(close_col, row, close[r]);
    if (bars.fields.has(BarField::OpenHighLow)) {
      check_price(open_col, row, open[r]);
      check_price(high_col, row, high[r]);
      check_price(low_col, row, low[r]);
      if (high[r] < low[r]) {
        high_col.fail_at(row, "high " + format_number(high[r]) + " is below low " + format_number(low[r]));
      }
    }
    if (bars.fields.has(BarField::Volume)) {
      if (!std::isfinite(volume[r])) {
        volume_col.fail_at(row, "value " + format_number(volume[r]) + " is not finite");
      }
      if (volume[r] < 0) volume_col.fail_at(row, "volume " + format_number(volume[r]) + " is negative");
    }
    auto& st = state[code];
    if (warm_up && !st.begun) {
      // A rolling feature's warm-up: the series starts at its first complete row.
      if (has_null(r)) {
        ++bars.leading_null_rows;
        continue;
      }
      st = {true, row, std::vector<double>(declared.size())};
    }
    for (size_t c = 0; c < declared.size(); ++c) {
      const auto& d = declared[c];
      if (d.valid[r]) {
        // A static input's value is the series' first; any other is an error (the first
        // row of a series begun in an earlier part compares with that part's value).
        if (c >= first_static && st.first_row != row && d.values[r] != st.last[c]) {
          auto shown = [&](double v) {
            const auto it = levels.find(d.col.name);
            return it == levels.end() ? format_number(v) : "'" + it->second.names.at(static_cast<size_t>(v)) + "'";
          };
          const std::string since =
              st.first_row >= 0 ? "row " + std::to_string(first_row + st.first_row + 1) : "an earlier file";
          d.col.fail_at(row, "static input of symbol '" + series.symbol + "' changes to " + shown(d.values[r]) +
                                 " from " + shown(st.last[c]) + " (" + since +
                                 "): a static input is constant within a series");
        }
        st.last[c] = d.values[r];
      } else if (!forward_fill) {
        const std::string since =
            st.first_row >= 0 ? "row " + std::to_string(first_row + st.first_row + 1) : "an earlier file";
        d.col.fail_at(row, "missing value (null or NaN) inside symbol '" + series.symbol +
                               "', whose declared inputs are complete since " + since +
                               ": give --missing forward-fill to carry the previous value forward");
      }
    }
    if (last_row[code] >= 0) {
      int64_t prev = series.timestamp_ns.back();
      if (ts[r] <= prev) {
        ts_col.fail_at(row, std::string(ts[r] == prev ? "duplicate" : "unsorted") + " timestamp " + format_utc(ts[r]) +
                                " for symbol '" + series.symbol + "': row " + std::to_string(last_row[code] + 1) +
                                " has " + format_utc(prev));
      }
    }
    last_row[code] = row;
    series.timestamp_ns.push_back(ts[r]);
    series.close.push_back(close[r]);
    if (bars.fields.has(BarField::OpenHighLow)) {
      series.open.push_back(open[r]);
      series.high.push_back(high[r]);
      series.low.push_back(low[r]);
    }
    if (bars.fields.has(BarField::Volume)) series.volume.push_back(volume[r]);
    if (target) {
      const double v = target->values[r];
      if (!target->valid[r]) {
        target->col.fail_at(row, "missing value (null or NaN) inside symbol '" + series.symbol +
                                     "': the target has no value at this bar (a target is never filled forward)");
      }
      if (const char* domain = target_domain_error(target_declaration.transform, v)) {
        target->col.fail_at(row, "value " + format_number(v) + " " + domain);
      }
      series.target_values.push_back(v);
    }
    for (size_t c = 0; c < declared.size(); ++c) {
      auto& column = c < n_observed     ? series.declared_observed[c]
                     : c < first_static ? series.declared_known[c - n_observed]
                                        : series.declared_static[c - first_static];
      column.push_back(st.last[c]);
    }
  }
  if (bars.declared.has_categoricals()) {
    // Every series holds the levels so far of each categorical column (the same list, as
    // their indices are the column's), so that a series stands alone.
    auto levels_of = [&](const std::vector<std::string>& reals, const std::vector<std::string>& categoricals) {
      std::vector<std::vector<std::string>> out(reals.size());
      for (const auto& name : categoricals) out.push_back(levels.at(name).names);
      return out;
    };
    const auto observed_levels = levels_of(bars.declared.observed, bars.declared.observed_categorical);
    const auto known_levels = levels_of(bars.declared.known, bars.declared.known_categorical);
    const auto static_levels = levels_of(bars.declared.statics, bars.declared.static_categorical);
    for (auto& series : bars.series) {
      series.observed_levels = observed_levels;
      series.known_levels = known_levels;
      series.static_levels = static_levels;
    }
  }
  if (carry) {
    for (size_t s = 0; s < symbols.names.size(); ++s) {
      if (state[s].begun) carry->last[symbols.names[s]] = state[s].last;
    }
  }
  return bars;
}

}  // namespace qtft::data
