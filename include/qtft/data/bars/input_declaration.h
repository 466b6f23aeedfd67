#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qtft/data/bars/derived_inputs.h"

namespace qtft::data {

// What a null cell of a declared input means. Leading nulls (a rolling feature's warm-up)
// are always dropped with their bars, per series; a null after a series' first complete row
// is an error, or takes the series' previous value (--missing forward-fill).
enum class MissingValues { Error, ForwardFill };

// How the target column becomes what the model forecasts, per bar i:
//   log-return  log(x[i] / x[i-1])    (the default, of the close)
//   none        x[i]
//   log         log(x[i])
//   log1p       log(1 + x[i])
// A log needs positive values (log1p values above -1): a bar that has none is an error.
enum class TargetTransform { LogReturn, None, Log, Log1p };
// How the target and the real inputs are standardized on the training split: one mean and
// standard deviation over every series (pooled), or each series its own (per-series).
enum class Normalization { Pooled, PerSeries };
const char* target_transform_name(TargetTransform transform);  // "log-return", "none", ...
const char* normalization_name(Normalization normalization);   // "pooled", "per-series"
// Why `value` cannot be transformed (a log of a non-positive value), or nullptr when it can.
const char* target_domain_error(TargetTransform transform, double value);
// Throw UsageError naming `flag` and the choices for an unknown name.
TargetTransform parse_target_transform(const std::string& name, const std::string& flag);
Normalization parse_normalization(const std::string& name, const std::string& flag);

// Which column the model forecasts and how: by default the log return of the close.
struct TargetDeclaration {
  std::string column;  // empty: the bars' close
  TargetTransform transform = TargetTransform::LogReturn;
  Normalization normalize = Normalization::Pooled;
  // The log return of the close, which the derived input log_return already holds; any other
  // target adds its own past as the observed input 'target'.
  bool is_close_log_return() const { return column.empty() && transform == TargetTransform::LogReturn; }
  // Today's target: the one-bar log return of the close, scaled over all series.
  bool is_default() const {
    return column.empty() && transform == TargetTransform::LogReturn && normalize == Normalization::Pooled;
  }
  bool operator==(const TargetDeclaration&) const = default;
};

// The most levels a categorical input may have in a file: more is a real column declared
// categorical by mistake, whose vocabulary would be a table the size of the file.
inline constexpr size_t kMaxCategoryLevels = 10'000;

// Which columns of a file feed the model besides the inputs derived from the bars, by kind:
// as the user declared them, column names or globs ('f_*', 'rv_??'), in order; resolved
// against a file (resolve_inputs), the columns themselves, a glob's matches in the file's
// order. Observed inputs are known up to each bar, known inputs also for the bars ahead,
// static inputs are constant within a series. Real columns hold numbers; categorical ones
// text, dictionary or integer values, each value a level with an embedding of its own.
struct InputDeclaration {
  std::vector<std::string> observed;
  std::vector<std::string> known;
  std::vector<std::string> statics;  // --static
  std::vector<std::string> observed_categorical, known_categorical, static_categorical;
  MissingValues missing = MissingValues::Error;
  // The tz database zone whose wall clock the calendar inputs read (--calendar-timezone);
  // empty for UTC.
  std::string calendar_timezone;
  // The calendar's terms (--calendar); none given: those that vary at the bars' spacing.
  std::optional<std::vector<CalendarTerm>> calendar;
  // The target (--target-column, --target-transform, --normalize); resolved, its column is
  // empty for the close (also when the close was named).
  TargetDeclaration target;
  // A saved model's columns (InputSchema::declared) rather than the user's flags: errors say so.
  bool from_model = false;
  bool empty() const {  // declares no column
    return observed.empty() && known.empty() && statics.empty() && observed_categorical.empty() &&
           known_categorical.empty() && static_categorical.empty() && target.column.empty();
  }
  // Each kind's columns in the order bars and features hold them: its reals, then its
  // categoricals.
  std::vector<std::string> observed_columns() const;
  std::vector<std::string> known_columns() const;
  std::vector<std::string> static_columns() const;
  bool has_categoricals() const {
    return !observed_categorical.empty() || !known_categorical.empty() || !static_categorical.empty();
  }
  // The same columns of each kind, the same missing values and target; the calendar and
  // from_model aside.
  bool same_columns(const InputDeclaration& other) const;
};

// A declaration file (--inputs FILE), JSON: {"observed": ["lead_signal", "f_*"], "known":
// ["event_flag"], "static": [...], "observed_categorical": [...], "known_categorical": [...],
// "static_categorical": ["sector"], "calendar": ["day-of-week", "month-of-year"]}, each list
// optional ("calendar": [] for none). Throws qtft::Error naming the file and, for text that
// does not parse, the line and column; an unknown key or a value that is not a list of
// strings names the key.
InputDeclaration read_input_declaration(const std::string& path);
// `more`'s lists after `into`'s (the flags' and a file's, together), and its calendar (throws
// UsageError when both name one and they differ).
void append_declaration(InputDeclaration& into, const InputDeclaration& more);

// A declaration of no column (its missing values and calendar only): what bars without
// declared columns, such as the embedded data, are read under. Throws qtft::Error naming
// `source` for a calendar zone the tz database does not know.
InputDeclaration without_columns(const InputDeclaration& declaration, const std::string& source);

// `columns` are the file's column names in file order; `bar_columns` those the bar reader
// takes (timestamp, symbol, prices, volume), which a glob never matches. Throws qtft::Error
// naming `source` for a name that no column has (listing the columns), a glob matching
// nothing, a column declared twice or under two kinds, and a timestamp or symbol column
// declared as an input (`not_inputs`), and for a calendar zone the tz database does not know.
// The target column is a name, not a glob; `bar_columns[3]` is the close column in use, which
// as a target stands for the bars' close. `unused`, when given, receives the file's columns
// that no input reads (neither a bar column in use nor declared).
InputDeclaration resolve_inputs(const InputDeclaration& declaration, const std::vector<std::string>& columns,
                                const std::vector<std::string>& bar_columns, const std::vector<std::string>& not_inputs,
                                const std::string& source, std::vector<std::string>* unused = nullptr);

}  // namespace qtft::data
