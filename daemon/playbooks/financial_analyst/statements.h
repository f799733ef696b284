// Yearly financial statements as the financial-analyst contract defines them
// (docs/financial-analyst.md, "Input" and "Validation"): parsing and validation.
//
// The daemon parses the caller's CSV itself, independently of whatever ran in the sandbox, so
// that the verifier can recompute every metric and compare its own validation results with the
// ones the run wrote to analysis_run.json.
//
//   ValidationReport report;
//   absl::StatusOr<Statements> st = LoadStatements(csv_bytes, &report);
//   if (!st.ok()) return st.status();  // fatal: report says which checks failed
//   for (const std::string& w : report.warnings) Log(w);
//
// Thread safe: pure functions over values.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_STATEMENTS_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_STATEMENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace sandgate::playbooks::financial {

// The contract's required columns, in the contract's order.
const std::vector<std::string>& RequiredColumns();

// Reads CSV text one record at a time (RFC 4180: quoted fields may hold commas, line breaks
// and doubled quotes), so that a file at the input limit costs one record of memory, not a
// copy of the file. A leading UTF-8 BOM is dropped; CRLF, LF and CR end records; empty lines
// are not records. Lenient the way Python's csv module is, so that the daemon reads a file
// exactly as the reference program does: text after a closing quote is appended to the field,
// a quote inside an unquoted field is literal. An unterminated quote runs to the end of input
// (as in Python) and is reported by unterminated_quote_line(), which callers turn into an
// error: such a file is almost always a stray quote, and its last "cell" swallowed the rest.
//
//   CsvReader reader(text);
//   std::vector<std::string> record;
//   while (reader.Next(&record)) Use(record, reader.record_line());
//
// Not thread safe; `text` must outlive the reader.
class CsvReader {
 public:
  explicit CsvReader(absl::string_view text);
  // The next record into *record; false at the end of input.
  bool Next(std::vector<std::string>* record);
  // Reads past the next record without keeping it (no allocation: counting the records of a
  // 64 MiB file at request time costs a scan, not a copy); *blank says whether every field of
  // it is blank. False at the end of input.
  bool Skip(bool* blank);
  // The 1-based physical line on which the record last returned starts.
  int record_line() const { return record_line_; }
  // The line on which a quoted field opened that never closed, or 0.
  int unterminated_quote_line() const { return unterminated_quote_line_; }

 private:
  // Next and Skip: `sink` receives the characters of each field and its end.
  template <typename Sink>
  bool Read(Sink& sink);

  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;  // of text_[pos_]
  int record_line_ = 0;
  int unterminated_quote_line_ = 0;
};

// Every record of `text` (CsvReader's rules), for files small enough to hold whole.
std::vector<std::vector<std::string>> ParseCsv(absl::string_view text);

// A plain decimal number ("-12", "3.5", "1e6", surrounding blanks allowed) that is finite.
// Rejects empty cells, thousands separators, currency signs, "nan", "inf" and hex.
std::optional<double> ParseNumber(absl::string_view cell);

// How many bad cells a report lists; a garbage file must not cost memory per cell.
inline constexpr size_t kMaxBadCells = 1000;

// The most data rows the playbook analyses. calculated_metrics.csv has a row per year of up
// to 16 cells of at most 17 characters (the reference program writes 10 significant digits),
// under 290 bytes, so 100,000 rows stay under the 32 MiB artifact cap whatever the numbers;
// the 64 MiB input limit alone cannot promise that (a row can be 30 bytes).
inline constexpr size_t kMaxDataRows = 100000;

struct BadCell {
  int row = 0;  // 1-based data row in file order (header and blank lines not counted)
  std::string column;
  std::string value;  // the cell as written
  int line = 0;       // the CSV line the row starts on (not a contract key)
};

// The validation results, with exactly the contract's keys (see ToJson). Every check runs on
// whatever the file holds, also after a fatal failure; a row whose cells are not numbers is
// left out of the checks that need them.
struct ValidationReport {
  bool required_columns_present = false;
  std::vector<std::string> missing_columns;  // in the contract's order
  bool all_values_numeric = false;
  std::vector<BadCell> bad_cells;  // file order, then the contract's column order
  bool years_unique = false;       // false for a missing, non-numeric or
                                   // non-integer year too
  bool years_ordered = true;       // the integer years, strictly ascending
  bool accounting_equation_passed_every_row = true;
  std::vector<int64_t> accounting_equation_failures;  // years, ascending
  bool at_least_two_years = false;

  // Not contract keys. A file with a header and no data rows is fatal although no key says so
  // (nothing can be analysed; the reference program agrees).
  bool has_data_rows = false;
  bool too_many_rows = false;       // more than kMaxDataRows; the rows past it are not read
  int unterminated_quote_line = 0;  // where a quote opened that never closes, or 0
  size_t bad_cell_count = 0;
  int row_count = 0;                                      // data rows (blank lines not counted)
  std::optional<std::pair<int64_t, int64_t>> year_range;  // of the integer years, if any
  // What a person reads: errors explain the fatal failures (naming the column, row and value,
  // or the year); warnings the non-fatal ones.
  std::vector<std::string> errors;
  std::vector<std::string> warnings;

  bool fatal() const {
    return !required_columns_present || !all_values_numeric || !years_unique || !has_data_rows ||
           too_many_rows || unterminated_quote_line > 0;
  }
  // {"required_columns_present": ..., "missing_columns": [...], "all_values_numeric": ...,
  //  "bad_cells": [{"row", "column", "value"}], "years_unique": ..., "years_ordered": ...,
  //  "accounting_equation_passed_every_row": ..., "accounting_equation_failures": [...],
  //  "at_least_two_years": ...}
  nlohmann::json ToJson() const;
};

// The keys of ValidationReport::ToJson, in that order.
const std::vector<std::string>& ValidationKeys();

struct StatementRow {
  int64_t year = 0;
  int source_row = 0;  // 1-based data row in the file
  int line = 0;        // the CSV line it starts on

  // The number in column `col`; nullopt if the cell is not one.
  std::optional<double> Value(size_t col) const;
  // Appends the next column's number (LoadStatements).
  void AddValue(std::optional<double> value);

  // The cell of column `col` as written when it is not a number, or is the year; empty for
  // other numbers (which nothing needs as text: keeping every cell's text cost 32 bytes a
  // cell, a few hundred MiB at the input limit).
  absl::string_view Raw(size_t col) const;
  // Keeps `text` as column `col`'s written form (LoadStatements, for the cells Raw covers).
  void KeepRaw(size_t col, std::string text);

 private:
  // One per column, NaN where the cell is not a number (a finite input never holds NaN): half
  // the size of std::optional<double>, which matters at 100,000 rows of many columns.
  std::vector<double> values_;
  std::vector<std::pair<size_t, std::string>> raw_;  // by column, ascending
};

// Parsed statements: columns in input order (extra columns kept; a column with an empty name
// or a repeated name is dropped, the first one wins), rows sorted by year.
class Statements {
 public:
  Statements() = default;
  Statements(std::vector<std::string> columns, std::vector<StatementRow> rows);

  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<StatementRow>& rows() const { return rows_; }
  // Index of `column` in columns(), or -1.
  int ColumnIndex(absl::string_view column) const;
  bool HasColumn(absl::string_view column) const { return ColumnIndex(column) >= 0; }
  // The numeric value of `column` in row `row` (an index into rows()); nullopt when the
  // column is absent or the cell is empty or not a number.
  std::optional<double> Get(size_t row, absl::string_view column) const;

 private:
  std::vector<std::string> columns_;
  std::vector<StatementRow> rows_;
};

// Parses and validates `csv`. Always fills *report. Returns INVALID_ARGUMENT naming every fatal
// problem (an empty file; missing columns; row, CSV line, column and value of non-numeric
// cells; a ragged row that lacks required cells; an unterminated quote; duplicate or
// non-integer years; no data rows; more than kMaxDataRows rows); otherwise the statements, with any
// warnings in report->warnings.
absl::StatusOr<Statements> LoadStatements(absl::string_view csv, ValidationReport* report);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_STATEMENTS_H_
