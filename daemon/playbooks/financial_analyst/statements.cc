#include "playbooks/financial_analyst/statements.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errors.h"
#include "playbooks/financial_analyst/text.h"

namespace sandgate::playbooks::financial {
namespace {

// Messages past this many are summarised in one line; a garbage file must not cost memory
// in proportion to its cells.
constexpr size_t kMaxMessages = 20;

void Note(std::vector<std::string>* list, std::string message) {
  if (list->size() < kMaxMessages) {
    list->push_back(std::move(message));
  } else if (list->size() == kMaxMessages) {
    list->push_back("(further problems of this file are not listed)");
  }
}

std::string Quote(absl::string_view cell) { return absl::StrCat("\"", Excerpt(cell, 40), "\""); }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Accepts [+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?
bool IsPlainDecimal(absl::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && IsDigit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsDigit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && IsDigit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

// Whether a plain decimal (IsPlainDecimal) is below 1 in magnitude, from its digits and
// exponent alone: tells an underflow from an overflow.
bool BelowOne(absl::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  int64_t exponent = 0;
  size_t e = s.find_first_of("eE");
  if (e != absl::string_view::npos) {
    absl::string_view digits = s.substr(e + 1);
    bool negative = !digits.empty() && digits[0] == '-';
    if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) digits.remove_prefix(1);
    for (char c : digits) exponent = std::min<int64_t>(exponent * 10 + (c - '0'), 1000000);
    if (negative) exponent = -exponent;
    s = s.substr(0, e);
  }
  // The decimal position of the first significant digit, plus the exponent.
  size_t point = s.find('.');
  absl::string_view whole = s.substr(0, point);
  size_t first = whole.find_first_not_of('0');
  int64_t position;
  if (first != absl::string_view::npos) {
    position = static_cast<int64_t>(whole.size() - first);
  } else {
    absl::string_view fraction = point == absl::string_view::npos ? "" : s.substr(point + 1);
    size_t nonzero = fraction.find_first_not_of('0');
    if (nonzero == absl::string_view::npos) return true;  // zero
    position = -static_cast<int64_t>(nonzero);
  }
  return position + exponent <= 0;
}

std::string YearsList(const std::vector<int64_t>& years) { return absl::StrJoin(years, ", "); }

}  // namespace

const std::vector<std::string>& RequiredColumns() {
  static const auto* const kColumns = new std::vector<std::string>{
      "year",
      "revenue",
      "cost_of_revenue",
      "operating_income",
      "interest_expense",
      "net_income",
      "accounts_receivable",
      "inventory",
      "total_current_assets",
      "total_assets",
      "total_current_liabilities",
      "total_liabilities",
      "shareholders_equity",
      "operating_cash_flow",
      "capital_expenditures",
  };
  return *kColumns;
}

const std::vector<std::string>& ValidationKeys() {
  static const auto* const kKeys = new std::vector<std::string>{
      "required_columns_present",
      "missing_columns",
      "all_values_numeric",
      "bad_cells",
      "years_unique",
      "years_ordered",
      "accounting_equation_passed_every_row",
      "accounting_equation_failures",
      "at_least_two_years",
  };
  return *kKeys;
}

CsvReader::CsvReader(absl::string_view text) : text_(text) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);
}

template <typename Sink>
bool CsvReader::Read(Sink& sink) {
  bool in_quotes = false;
  int quote_line = 0;
  bool record_started = false;  // an empty line is no record
  // Ends the physical line at text_[pos_] ("\r\n" counts once); true when a record ended.
  auto end_line = [&] {
    if (text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
    ++pos_;
    ++line_;
    return record_started;
  };
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (!record_started && c != '\r' && c != '\n') record_line_ = line_;
    if (in_quotes) {
      if (c == '\r' || c == '\n') {
        sink.Add(c);
        if (c == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') {
          sink.Add('\n');
          ++pos_;
        }
        ++pos_;
        ++line_;
        continue;
      }
      if (c != '"') {
        sink.Add(c);
      } else if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '"') {
        sink.Add('"');
        ++pos_;
      } else {
        in_quotes = false;
      }
      ++pos_;
      continue;
    }
    switch (c) {
      case '"':
        // Opens a quoted field only at its start; elsewhere it is a literal quote.
        if (sink.FieldEmpty()) {
          in_quotes = true;
          quote_line = line_;
        } else {
          sink.Add(c);
        }
        record_started = true;
        break;
      case ',':
        sink.EndField();
        record_started = true;
        break;
      case '\r':
      case '\n':
        if (end_line()) {
          sink.EndField();
          return true;
        }
        continue;
      default:
        sink.Add(c);
        record_started = true;
    }
    ++pos_;
  }
  if (in_quotes) unterminated_quote_line_ = quote_line;
  if (!record_started) return false;
  sink.EndField();
  return true;
}

namespace {

// Keeps the fields.
struct FieldSink {
  std::vector<std::string>* record;
  std::string field;
  void Add(char c) { field.push_back(c); }
  bool FieldEmpty() const { return field.empty(); }
  void EndField() {
    record->push_back(std::move(field));
    field.clear();
  }
};

// Keeps only whether every field is blank (what StripAsciiWhitespace would leave empty).
struct BlankSink {
  bool blank = true;
  size_t field_size = 0;
  void Add(char c) {
    ++field_size;
    if (!absl::ascii_isspace(static_cast<unsigned char>(c))) blank = false;
  }
  bool FieldEmpty() const { return field_size == 0; }
  void EndField() { field_size = 0; }
};

}  // namespace

bool CsvReader::Next(std::vector<std::string>* record) {
  record->clear();
  FieldSink sink{record, {}};
  return Read(sink);
}

bool CsvReader::Skip(bool* blank) {
  BlankSink sink;
  bool read = Read(sink);
  *blank = sink.blank;
  return read;
}

std::vector<std::vector<std::string>> ParseCsv(absl::string_view text) {
  std::vector<std::vector<std::string>> records;
  CsvReader reader(text);
  std::vector<std::string> record;
  while (reader.Next(&record)) records.push_back(record);
  return records;
}

std::optional<double> ParseNumber(absl::string_view cell) {
  absl::string_view s = absl::StripAsciiWhitespace(cell);
  if (!IsPlainDecimal(s)) return std::nullopt;
  if (s[0] == '+') s.remove_prefix(1);  // from_chars takes no '+'
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec == std::errc::result_out_of_range) {
    // Too small is zero (as Python's float() has it), too large is not finite.
    if (!BelowOne(s)) return std::nullopt;
    return s[0] == '-' ? -0.0 : 0.0;
  }
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

nlohmann::json ValidationReport::ToJson() const {
  nlohmann::json bad = nlohmann::json::array();
  for (const BadCell& cell : bad_cells) {
    bad.push_back({{"row", cell.row}, {"column", cell.column}, {"value", cell.value}});
  }
  nlohmann::json j = nlohmann::json::object();
  j["required_columns_present"] = required_columns_present;
  j["missing_columns"] = missing_columns;
  j["all_values_numeric"] = all_values_numeric;
  j["bad_cells"] = std::move(bad);
  j["years_unique"] = years_unique;
  j["years_ordered"] = years_ordered;
  j["accounting_equation_passed_every_row"] = accounting_equation_passed_every_row;
  j["accounting_equation_failures"] = accounting_equation_failures;
  j["at_least_two_years"] = at_least_two_years;
  return j;
}

std::optional<double> StatementRow::Value(size_t col) const {
  if (col >= values_.size() || std::isnan(values_[col])) return std::nullopt;
  return values_[col];
}

void StatementRow::AddValue(std::optional<double> value) {
  values_.push_back(value.value_or(std::numeric_limits<double>::quiet_NaN()));
}

absl::string_view StatementRow::Raw(size_t col) const {
  auto it = std::lower_bound(
      raw_.begin(), raw_.end(), col,
      [](const std::pair<size_t, std::string>& cell, size_t c) { return cell.first < c; });
  return it != raw_.end() && it->first == col ? absl::string_view(it->second) : "";
}

void StatementRow::KeepRaw(size_t col, std::string text) {
  auto it = std::lower_bound(
      raw_.begin(), raw_.end(), col,
      [](const std::pair<size_t, std::string>& cell, size_t c) { return cell.first < c; });
  if (it != raw_.end() && it->first == col) {
    it->second = std::move(text);
  } else {
    raw_.insert(it, {col, std::move(text)});
  }
}

Statements::Statements(std::vector<std::string> columns, std::vector<StatementRow> rows)
    : columns_(std::move(columns)), rows_(std::move(rows)) {}

int Statements::ColumnIndex(absl::string_view column) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i] == column) return static_cast<int>(i);
  }
  return -1;
}

std::optional<double> Statements::Get(size_t row, absl::string_view column) const {
  int col = ColumnIndex(column);
  if (col < 0 || row >= rows_.size()) return std::nullopt;
  return rows_[row].Value(col);
}

absl::StatusOr<Statements> LoadStatements(absl::string_view csv, ValidationReport* report) {
  *report = ValidationReport();
  CsvReader reader(csv);
  std::vector<std::string> header;
  std::vector<std::string> fields;
  // A record whose every cell is blank is a blank line, wherever it is.
  auto next_record = [&](std::vector<std::string>* out) {
    while (reader.Next(out)) {
      for (const std::string& f : *out) {
        if (!absl::StripAsciiWhitespace(f).empty()) return true;
      }
    }
    return false;
  };
  if (!next_record(&header)) {
    report->missing_columns = RequiredColumns();
    Note(&report->errors, "the file is empty: expected a header row and yearly rows");
    return errors::InvalidArgument(report->errors.back());
  }

  // Columns: named, first occurrence wins; `positions` maps them to their fields.
  std::vector<std::string> columns;
  std::vector<size_t> positions;
  for (size_t i = 0; i < header.size(); ++i) {
    std::string name(absl::StripAsciiWhitespace(header[i]));
    if (name.empty()) continue;
    if (std::find(columns.begin(), columns.end(), name) != columns.end()) {
      Note(&report->warnings,
           absl::StrCat("column ", Quote(name), " appears more than once; the first one is used"));
      continue;
    }
    columns.push_back(std::move(name));
    positions.push_back(i);
  }
  // The last field position a required column reads: a shorter row lacks required cells.
  size_t required_width = 0;
  for (size_t i = 0; i < columns.size(); ++i) {
    if (std::find(RequiredColumns().begin(), RequiredColumns().end(), columns[i]) !=
        RequiredColumns().end()) {
      required_width = std::max(required_width, positions[i] + 1);
    }
  }
  int year_position = -1;  // in `columns`
  for (size_t c = 0; c < columns.size(); ++c) {
    if (columns[c] == "year") year_position = static_cast<int>(c);
  }
  std::vector<StatementRow> rows;
  while (next_record(&fields)) {
    StatementRow row;
    row.source_row = static_cast<int>(rows.size()) + 1;
    row.line = reader.record_line();
    if (rows.size() == kMaxDataRows) {
      report->too_many_rows = true;
      Note(&report->errors, absl::StrCat("more than ", kMaxDataRows, " data rows (CSV line ",
                                         row.line, " is data row ", kMaxDataRows + 1,
                                         "): the financial-analyst playbook's limit, which keeps "
                                         "calculated_metrics.csv under the artifact size cap"));
      break;
    }
    // A ragged row is almost always a missing or unquoted comma; say so instead of letting
    // it read as empty or shifted cells only.
    bool extra = false;
    for (size_t i = header.size(); i < fields.size() && !extra; ++i) {
      extra = !absl::StripAsciiWhitespace(fields[i]).empty();
    }
    if (extra || fields.size() < header.size()) {
      std::string what =
          absl::StrCat("ragged row: data row ", row.source_row, " (CSV line ", row.line, ") has ",
                       fields.size(), " cells, the header has ", header.size(), " columns");
      if (extra) {
        Note(&report->warnings, absl::StrCat(what, "; the extra cells are ignored"));
      } else if (fields.size() < required_width) {
        Note(&report->errors, absl::StrCat(what,
                                           "; the required cells past the last one are "
                                           "missing"));
      } else {
        Note(&report->warnings, absl::StrCat(what, "; the missing optional cells are blank"));
      }
    }
    for (size_t c = 0; c < positions.size(); ++c) {
      size_t pos = positions[c];
      absl::string_view cell = pos < fields.size() ? absl::string_view(fields[pos]) : "";
      std::optional<double> value = ParseNumber(cell);
      row.AddValue(value);
      if (!value.has_value() || static_cast<int>(c) == year_position) {
        row.KeepRaw(c, std::string(cell));
      }
    }
    rows.push_back(std::move(row));
  }
  if (reader.unterminated_quote_line() > 0) {
    report->unterminated_quote_line = reader.unterminated_quote_line();
    Note(&report->errors,
         absl::StrCat("unterminated quote: the quoted field that opens on CSV line ",
                      reader.unterminated_quote_line(),
                      " never closes, so it runs to the end of the file"));
  }
  Statements in_file_order(columns, {});  // for column lookups only
  report->row_count = static_cast<int>(rows.size());
  report->has_data_rows = !rows.empty();
  if (!report->has_data_rows) {
    Note(&report->errors, "no data rows: the file has a header but no yearly rows");
  }

  // Required columns.
  for (const std::string& required : RequiredColumns()) {
    if (!in_file_order.HasColumn(required)) report->missing_columns.push_back(required);
  }
  report->required_columns_present = report->missing_columns.empty();
  if (!report->required_columns_present) {
    Note(&report->errors, absl::StrCat("missing required column(s): ",
                                       absl::StrJoin(report->missing_columns, ", ")));
  }

  // Numeric cells, in file order then the contract's column order.
  for (const StatementRow& row : rows) {
    for (const std::string& required : RequiredColumns()) {
      int c = in_file_order.ColumnIndex(required);
      if (c >= 0 && !row.Value(c).has_value()) {
        if (report->bad_cells.size() < kMaxBadCells) {
          report->bad_cells.push_back(
              {row.source_row, required, std::string(row.Raw(c)), row.line});
        }
        ++report->bad_cell_count;
      }
    }
  }
  report->all_values_numeric = report->bad_cell_count == 0;
  for (const BadCell& cell : report->bad_cells) {
    Note(
        &report->errors,
        absl::StrCat(
            "data row ", cell.row, " (CSV line ", cell.line, "), column ", cell.column, ": ",
            absl::StripAsciiWhitespace(cell.value).empty() ? "empty value" : "not a finite number ",
            absl::StripAsciiWhitespace(cell.value).empty() ? "" : Quote(cell.value)));
  }

  // Integer, unique years.
  int year_col = in_file_order.ColumnIndex("year");
  report->years_unique = year_col >= 0;
  std::vector<int64_t> known_years;  // file order
  if (year_col >= 0) {
    std::map<int64_t, const StatementRow*> first_row;  // year -> the row it first appears in
    for (StatementRow& row : rows) {
      const std::optional<double> y = row.Value(year_col);
      if (!y.has_value()) {
        report->years_unique = false;  // reported as a bad cell above
        continue;
      }
      if (*y != std::floor(*y) || std::fabs(*y) > 9007199254740992.0) {
        report->years_unique = false;
        Note(&report->errors,
             absl::StrCat("data row ", row.source_row, " (CSV line ", row.line,
                          "): year is not an integer: ", Quote(row.Raw(year_col))));
        continue;
      }
      row.year = static_cast<int64_t>(*y);
      known_years.push_back(row.year);
      auto [it, inserted] = first_row.emplace(row.year, &row);
      if (!inserted) {
        report->years_unique = false;
        Note(&report->errors,
             absl::StrCat("duplicate year ", row.year, " at data rows ", it->second->source_row,
                          " and ", row.source_row, " (CSV lines ", it->second->line, " and ",
                          row.line, ")"));
      }
    }
  }
  if (!known_years.empty()) {
    auto [lo, hi] = std::minmax_element(known_years.begin(), known_years.end());
    report->year_range = std::make_pair(*lo, *hi);
  }
  for (size_t i = 1; i < known_years.size(); ++i) {
    if (known_years[i] <= known_years[i - 1]) report->years_ordered = false;
  }
  if (!report->years_ordered) {
    Note(&report->warnings, "years are not in ascending order in the file; rows were sorted");
  }

  // The accounting equation, on every row that has the three numbers.
  int assets_col = in_file_order.ColumnIndex("total_assets");
  int liabilities_col = in_file_order.ColumnIndex("total_liabilities");
  int equity_col = in_file_order.ColumnIndex("shareholders_equity");
  if (assets_col >= 0 && liabilities_col >= 0 && equity_col >= 0) {
    for (const StatementRow& row : rows) {
      std::optional<double> assets = row.Value(assets_col);
      std::optional<double> liabilities = row.Value(liabilities_col);
      std::optional<double> equity = row.Value(equity_col);
      if (!assets || !liabilities || !equity) continue;
      if (std::fabs(*assets - (*liabilities + *equity)) >
          std::max(1.0, 1e-6 * std::fabs(*assets))) {
        // A row without an integer year cannot be named by year; the fatal error names it.
        if (year_col >= 0 && row.Value(year_col) && *row.Value(year_col) == row.year) {
          report->accounting_equation_failures.push_back(row.year);
        }
        report->accounting_equation_passed_every_row = false;
      }
    }
  }
  std::sort(report->accounting_equation_failures.begin(),
            report->accounting_equation_failures.end());
  if (!report->accounting_equation_passed_every_row) {
    Note(&report->warnings,
         absl::StrCat("total_assets != total_liabilities + shareholders_equity in ",
                      YearsList(report->accounting_equation_failures)));
  }
  report->at_least_two_years = rows.size() >= 2;
  if (!report->at_least_two_years) {
    Note(&report->warnings, absl::StrCat("only ", rows.size(),
                                         " data row(s): growth, roa, roe and the "
                                         "unusual-movement rules stay blank"));
  }

  if (report->fatal()) return errors::InvalidArgument(absl::StrJoin(report->errors, "; "));
  std::stable_sort(rows.begin(), rows.end(),
                   [](const StatementRow& a, const StatementRow& b) { return a.year < b.year; });
  return Statements(std::move(columns), std::move(rows));
}

}  // namespace sandgate::playbooks::financial
