#pragma once

#include <string>
#include <vector>

namespace qtft::data {

// What a null cell of a declared input means. Leading nulls (a rolling feature's warm-up)
// are always dropped with their bars, per series; a null after a series' first complete row
// is an error, or takes the series' previous value (--missing forward-fill).
enum class MissingValues { Error, ForwardFill };

// Which columns of a file feed the model as real inputs besides the ones derived from the
// bars, by kind, as the user declared them: column names or globs ('f_*', 'rv_??'), in
// order. Observed inputs are known up to each bar, known inputs also for the bars ahead.
struct InputDeclaration {
  std::vector<std::string> observed;
  std::vector<std::string> known;
  MissingValues missing = MissingValues::Error;
  // The tz database zone whose wall clock the calendar inputs read (--calendar-timezone);
  // empty for UTC.
  std::string calendar_timezone;
  // A saved model's columns (data::declaration_of) rather than the user's flags: errors say so.
  bool from_model = false;
  bool empty() const { return observed.empty() && known.empty(); }  // declares no column
};

// A declaration file (--inputs FILE), JSON: {"observed": ["lead_signal", "f_*"], "known":
// ["event_flag"]}, each list optional. Throws qtft::Error naming the file and, for text that
// does not parse, the line and column; an unknown key or a value that is not a list of
// strings names the key.
InputDeclaration read_input_declaration(const std::string& path);
// `more`'s lists after `into`'s (the flags' and a file's, together).
void append_declaration(InputDeclaration& into, const InputDeclaration& more);

// A declaration resolved against one file's columns: the columns of each kind, in the order
// of the declaration (a glob's matches in the file's order), and the file's columns that no
// input reads (neither a bar column in use nor declared).
struct DeclaredColumns {
  std::vector<std::string> observed;
  std::vector<std::string> known;
  std::vector<std::string> unused;
  MissingValues missing = MissingValues::Error;
  std::string calendar_timezone;                                    // checked against the tz database; empty for UTC
  bool empty() const { return observed.empty() && known.empty(); }  // reads no column
};
// A declaration of no column (its missing values and calendar only): what bars without
// declared columns, such as the embedded data, are read under. Throws qtft::Error naming
// `source` for a calendar zone the tz database does not know.
DeclaredColumns without_columns(const InputDeclaration& declaration, const std::string& source);

// `columns` are the file's column names in file order; `bar_columns` those the bar reader
// takes (timestamp, symbol, prices, volume), which a glob never matches. Throws qtft::Error
// naming `source` for a name that no column has (listing the columns), a glob matching
// nothing, a column declared twice or under two kinds, and a timestamp or symbol column
// declared as an input (`not_inputs`), and for a calendar zone the tz database does not know.
DeclaredColumns resolve_inputs(const InputDeclaration& declaration, const std::vector<std::string>& columns,
                               const std::vector<std::string>& bar_columns, const std::vector<std::string>& not_inputs,
                               const std::string& source);

}  // namespace qtft::data
