#include "playbooks/financial_analyst/verifier.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/summary.h"
#include "playbooks/financial_analyst/svg_check.h"
#include "playbooks/financial_analyst/text.h"

namespace sandgate::playbooks::financial {
namespace {

using json = nlohmann::json;

// How many problems a failed check lists before it only counts them.
constexpr size_t kListed = 5;

// Lists the first kListed problems and counts the rest.
std::string Problems(const std::vector<std::string>& problems) {
  std::vector<std::string> shown(problems.begin(),
                                 problems.begin() + std::min(problems.size(), kListed));
  std::string out = absl::StrJoin(shown, "; ");
  if (problems.size() > kListed) absl::StrAppend(&out, "; (", problems.size(), " in all)");
  return out;
}

Check Result(std::string name, const std::vector<std::string>& problems, std::string ok_detail) {
  Check c;
  c.name = std::move(name);
  c.passed = problems.empty();
  c.detail = c.passed ? std::move(ok_detail) : Problems(problems);
  return c;
}

std::string Num(double v) { return absl::StrFormat("%.10g", v); }

std::string Num(const std::optional<double>& v) { return v.has_value() ? Num(*v) : "empty"; }

std::string HeaderText(const std::vector<std::string>& header) {
  std::vector<std::string> shown;
  for (const std::string& h : header) shown.push_back(Excerpt(h, 40));
  return Excerpt(absl::StrJoin(shown, ","), 400);
}

// An integer in a CSV cell or a JSON value ("2021", 2021, 2021.0).
std::optional<int64_t> IntegerCell(absl::string_view cell) {
  std::optional<double> v = ParseNumber(cell);
  if (!v.has_value() || *v != std::floor(*v) || std::fabs(*v) > 1e15) return std::nullopt;
  return static_cast<int64_t>(*v);
}

std::optional<int64_t> IntegerJson(const json& j) {
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 1e15) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

// A JSON value for a message, bounded in depth and length (dump() recurses without limit and
// throws on invalid UTF-8).
std::string JsonText(const json& j, int depth = 0) {
  if (j.is_array() || j.is_object()) {
    if (depth >= 2 || j.size() > 20) return j.is_array() ? "[...]" : "{...}";
    std::vector<std::string> parts;
    for (auto it = j.begin(); it != j.end(); ++it) {
      std::string value = JsonText(it.value(), depth + 1);
      parts.push_back(j.is_array() ? value
                                   : absl::StrCat("\"", Excerpt(it.key(), 40), "\": ", value));
    }
    std::string body = absl::StrJoin(parts, ", ");
    return Excerpt(j.is_array() ? absl::StrCat("[", body, "]") : absl::StrCat("{", body, "}"), 200);
  }
  return Excerpt(j.dump(-1, ' ', false, json::error_handler_t::replace), 80);
}

// obj[key] for reading: null when obj is not an object or lacks the key (operator[] on a
// const json is undefined for a missing key).
const json& Field(const json& obj, const std::string& key) {
  static const json* const kNull = new json();
  if (!obj.is_object()) return *kNull;
  auto it = obj.find(key);
  return it == obj.end() ? *kNull : *it;
}

// Half a unit in the sixth significant digit of `expected` (0.1234565 -> 5e-7): the contract
// asks for "at least 6 significant digits", which can be up to 5e-6 off in relative terms, so a
// cell that holds the expected value correctly rounded to six significant digits passes even
// where 1e-6 relative would not ("%.6g" also drops trailing zeros: 1.0000049 -> "1").
double RoundingAllowance(double expected) {
  if (expected == 0 || !std::isfinite(expected)) return 0;
  return 0.5 * std::pow(10.0, std::floor(std::log10(std::fabs(expected))) - 5) * (1 + 1e-9);
}

bool Matches(double expected, double found) {
  double diff = std::fabs(found - expected);
  return diff <= 1e-9 || diff <= 1e-6 * std::fabs(expected) || diff <= RoundingAllowance(expected);
}

// A CSV artifact as header + records; an empty vector when there is nothing.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int Column(absl::string_view name) const {
    for (size_t i = 0; i < header.size(); ++i) {
      if (absl::StripAsciiWhitespace(header[i]) == name) return static_cast<int>(i);
    }
    return -1;
  }
  static std::string Cell(const std::vector<std::string>& row, int col) {
    return col >= 0 && static_cast<size_t>(col) < row.size() ? row[col] : std::string();
  }
};

Table ReadTable(absl::string_view text) {
  Table t;
  std::vector<std::vector<std::string>> records = ParseCsv(text);
  if (records.empty()) return t;
  t.header = std::move(records[0]);
  t.rows.assign(std::make_move_iterator(records.begin() + 1),
                std::make_move_iterator(records.end()));
  return t;
}

Check HeaderCheck(std::string name, const Table& table, const std::vector<std::string>& expected) {
  std::vector<std::string> found;
  for (const std::string& h : table.header)
    found.push_back(std::string(absl::StripAsciiWhitespace(h)));
  std::vector<std::string> problems;
  if (found != expected) {
    std::vector<std::string> missing, unexpected;
    for (const std::string& e : expected) {
      if (std::find(found.begin(), found.end(), e) == found.end()) missing.push_back(e);
    }
    for (const std::string& f : found) {
      if (std::find(expected.begin(), expected.end(), f) == expected.end()) {
        unexpected.push_back(Excerpt(f, 40));
      }
    }
    std::string what = absl::StrCat("header is \"", HeaderText(table.header), "\", expected \"",
                                    absl::StrJoin(expected, ","), "\"");
    if (!missing.empty()) absl::StrAppend(&what, "; missing: ", absl::StrJoin(missing, ", "));
    if (!unexpected.empty()) {
      absl::StrAppend(&what, "; unexpected: ", absl::StrJoin(unexpected, ", "));
    }
    if (missing.empty() && unexpected.empty()) absl::StrAppend(&what, "; wrong order");
    problems.push_back(what);
  }
  return Result(std::move(name), problems, absl::StrCat(expected.size(), " columns in order"));
}

// At most 20 years, for a message.
std::string YearList(const std::vector<std::string>& years) {
  std::vector<std::string> shown(years.begin(), years.begin() + std::min<size_t>(years.size(), 20));
  return absl::StrCat(absl::StrJoin(shown, ", "), years.size() > 20 ? ", ..." : "");
}

void CheckMetrics(const std::vector<MetricsRow>& expected, absl::string_view text,
                  std::vector<Check>* out) {
  Table table = ReadTable(text);
  out->push_back(HeaderCheck("calculated_metrics.columns", table, MetricColumns()));

  // Rows: one per year, ascending.
  int year_col = table.Column("year");
  std::vector<std::string> found_years;
  std::map<int64_t, size_t> row_of_year;  // first occurrence
  for (size_t r = 0; r < table.rows.size(); ++r) {
    std::string cell = Table::Cell(table.rows[r], year_col);
    found_years.push_back(Excerpt(absl::StripAsciiWhitespace(cell), 20));
    if (std::optional<int64_t> y = IntegerCell(cell)) row_of_year.emplace(*y, r);
  }
  std::vector<std::string> expected_years;
  for (const MetricsRow& m : expected) expected_years.push_back(absl::StrCat(m.year));
  std::vector<std::string> problems;
  if (year_col < 0) {
    problems.push_back("no year column");
  } else if (found_years != expected_years) {
    problems.push_back(absl::StrCat("years are [", YearList(found_years), "], expected [",
                                    YearList(expected_years), "]"));
  }
  out->push_back(Result("calculated_metrics.rows", problems,
                        absl::StrCat(expected.size(), " rows, one per year ascending")));

  // Values, by year and column name, for whatever rows and columns the file has.
  problems.clear();
  size_t compared = 0;
  if (year_col < 0) problems.push_back("no year column: no row can be matched to a year");
  for (const MetricsRow& m : expected) {
    auto row = row_of_year.find(m.year);
    if (year_col < 0 || row == row_of_year.end()) continue;  // calculated_metrics.rows says so
    const std::vector<std::string>& cells = table.rows[row->second];
    for (size_t i = 1; i < MetricColumns().size(); ++i) {
      const std::string& metric = MetricColumns()[i];
      int col = table.Column(metric);
      if (col < 0) continue;  // calculated_metrics.columns says so
      ++compared;
      std::string cell = Table::Cell(cells, col);
      absl::string_view trimmed = absl::StripAsciiWhitespace(cell);
      std::optional<double> want = m.values[i - 1];
      std::optional<double> got = ParseNumber(trimmed);
      std::string where = absl::StrCat(m.year, " ", metric, ": expected ", Num(want));
      if (!trimmed.empty() && !got.has_value()) {
        problems.push_back(
            absl::StrCat(where, ", found \"", Excerpt(trimmed, 30), "\" (not a number)"));
      } else if (want.has_value() != got.has_value() ||
                 (want.has_value() && !Matches(*want, *got))) {
        problems.push_back(
            absl::StrCat(where, ", found ", got.has_value() ? Excerpt(trimmed, 30) : "empty"));
      }
    }
  }
  out->push_back(
      Result("calculated_metrics.values", problems, absl::StrCat(compared, " cells match")));
}

using Hit = std::tuple<int64_t, std::string, std::string>;  // year, item, rule

std::string HitText(const Hit& h) {
  return absl::StrCat(std::get<0>(h), "/", Excerpt(std::get<1>(h), 40), "/",
                      Excerpt(std::get<2>(h), 40));
}

void CheckMovements(const std::vector<UnusualMovement>& hits, absl::string_view text,
                    std::vector<Check>* out) {
  Table table = ReadTable(text);
  out->push_back(HeaderCheck("unusual_movements.columns", table, MovementColumns()));
  std::set<Hit> expected;
  for (const UnusualMovement& m : hits) {
    expected.emplace(m.year, m.item, m.rule);
  }
  std::vector<std::string> problems;
  int year_col = table.Column("year"), item_col = table.Column("item"),
      rule_col = table.Column("rule");
  if (year_col < 0 || item_col < 0 || rule_col < 0) {
    problems.push_back("the file lacks a year, item or rule column: no hit can be read");
  } else {
    std::set<Hit> found;
    std::vector<std::string> unreadable;
    for (size_t r = 0; r < table.rows.size(); ++r) {
      const auto& row = table.rows[r];
      std::string year = Table::Cell(row, year_col);
      std::optional<int64_t> y = IntegerCell(year);
      if (!y.has_value()) {
        unreadable.push_back(
            absl::StrCat("row ", r + 1, ": year \"", Excerpt(year, 20), "\" is not an integer"));
        continue;
      }
      found.emplace(*y, std::string(absl::StripAsciiWhitespace(Table::Cell(row, item_col))),
                    std::string(absl::StripAsciiWhitespace(Table::Cell(row, rule_col))));
    }
    std::vector<std::string> missing, unexpected;
    for (const Hit& h : expected) {
      if (!found.count(h)) missing.push_back(HitText(h));
    }
    for (const Hit& h : found) {
      if (!expected.count(h)) unexpected.push_back(HitText(h));
    }
    auto listed = [](const std::vector<std::string>& v) {
      std::vector<std::string> shown(v.begin(), v.begin() + std::min(v.size(), kListed));
      return absl::StrCat(absl::StrJoin(shown, ", "),
                          v.size() > kListed ? absl::StrCat(" (", v.size(), " in all)") : "");
    };
    if (!missing.empty()) problems.push_back(absl::StrCat("missing hits: ", listed(missing)));
    if (!unexpected.empty()) {
      problems.push_back(absl::StrCat("unexpected hits: ", listed(unexpected)));
    }
    if (!unreadable.empty()) problems.push_back(listed(unreadable));
  }
  out->push_back(Result("unusual_movements.hits", problems,
                        absl::StrCat(expected.size(), " hits (year/item/rule) match")));
}

// "## 1. Executive view ##" -> "executive view"
std::string NormalizeHeading(absl::string_view line) {
  absl::string_view h = absl::StripAsciiWhitespace(line.substr(2));
  while (!h.empty() && h.back() == '#') h.remove_suffix(1);
  h = absl::StripAsciiWhitespace(h);
  size_t digits = 0;
  while (digits < h.size() && absl::ascii_isdigit(h[digits])) ++digits;
  if (digits > 0 && digits < h.size() && (h[digits] == '.' || h[digits] == ')')) {
    h = absl::StripAsciiWhitespace(h.substr(digits + 1));
  }
  std::string out;
  for (char c : h) {
    if (c != '*' && c != '_') out.push_back(absl::ascii_tolower(c));
  }
  return std::string(absl::StripAsciiWhitespace(out));
}

void CheckMemo(absl::string_view input_filename, absl::string_view memo, std::vector<Check>* out) {
  std::vector<std::string> found;  // normalized "## " headings outside code fences
  bool in_fence = false;
  for (absl::string_view line : absl::StrSplit(memo, '\n')) {
    absl::string_view stripped = absl::StripLeadingAsciiWhitespace(line);
    if (absl::StartsWith(stripped, "```") || absl::StartsWith(stripped, "~~~")) {
      in_fence = !in_fence;
      continue;
    }
    if (!in_fence && absl::StartsWith(line, "## ")) found.push_back(NormalizeHeading(line));
  }
  std::vector<std::string> missing, out_of_order;
  size_t next = 0;  // where in `found` the next heading may start
  for (const std::string& heading : MemoHeadings()) {
    std::string want = absl::AsciiStrToLower(heading);
    auto in_order = std::find(found.begin() + next, found.end(), want);
    if (in_order != found.end()) {
      next = in_order - found.begin() + 1;
    } else if (std::find(found.begin(), found.end(), want) != found.end()) {
      out_of_order.push_back(heading);
    } else {
      missing.push_back(heading);
    }
  }
  std::vector<std::string> problems;
  if (!missing.empty()) {
    problems.push_back(absl::StrCat("missing headings: ", absl::StrJoin(missing, ", ")));
  }
  if (!out_of_order.empty()) {
    problems.push_back(absl::StrCat("out of order: ", absl::StrJoin(out_of_order, ", ")));
  }
  out->push_back(Result("memo.headings", problems,
                        absl::StrCat("all ", MemoHeadings().size(), " headings, in order")));
  problems.clear();
  if (input_filename.empty() || !absl::StrContains(memo, input_filename)) {
    problems.push_back(
        absl::StrCat("the memo never names the input file \"", Excerpt(input_filename, 80), "\""));
  }
  out->push_back(Result("memo.cites_input", problems, "names the input file"));
}

void CheckChart(absl::string_view svg, std::vector<Check>* out) {
  SvgFacts facts = InspectSvg(svg);
  std::vector<std::string> problems;
  if (!facts.well_formed) problems.push_back(facts.parse_error);
  out->push_back(Result("chart.well_formed", problems, "well-formed XML with an <svg> root"));
  if (!facts.well_formed) return;
  problems.clear();
  if (facts.panels() < 4) {
    problems.push_back(
        absl::StrCat("found ", facts.panels(), " titled panels (", facts.panel_titles,
                     " panel titles, ", facts.titled_groups,
                     " titled panel groups), need 4: give each panel a <title> inside "
                     "its <g>, or a <text class=\"panel-title\">"));
  }
  out->push_back(Result("chart.panels", problems, absl::StrCat(facts.panels(), " titled panels")));
  out->push_back(Result("chart.no_script", facts.scripts, "no script or event handler"));
  out->push_back(
      Result("chart.no_external_refs", facts.external_refs, "no external reference or image"));
}

// The manifest's validation_results against the daemon's, key by key.
std::vector<std::string> CompareValidation(const json& got, const ValidationReport& want) {
  std::vector<std::string> problems;
  json mine = want.ToJson();
  auto differs = [&](const std::string& key, const std::string& found) {
    problems.push_back(
        absl::StrCat(key, ": manifest has ", found, ", the daemon found ", JsonText(mine[key])));
  };
  auto compare_bool = [&](const std::string& key) {
    const json& v = Field(got, key);
    if (!v.is_boolean() || v.get<bool>() != mine[key].get<bool>()) differs(key, JsonText(v));
  };
  auto compare_strings = [&](const std::string& key) {
    const json& v = Field(got, key);
    std::set<std::string> found;
    bool ok = v.is_array();
    for (const json& e : ok ? v : json::array()) {
      if (e.is_string()) {
        found.insert(e.get<std::string>());
      } else {
        ok = false;
      }
    }
    std::set<std::string> expected = mine[key].get<std::set<std::string>>();
    if (!ok || found != expected) differs(key, JsonText(v));
  };
  auto compare_years = [&](const std::string& key) {
    const json& v = Field(got, key);
    std::set<int64_t> found;
    bool ok = v.is_array();
    for (const json& e : ok ? v : json::array()) {
      std::optional<int64_t> y = IntegerJson(e);
      if (y.has_value()) {
        found.insert(*y);
      } else {
        ok = false;
      }
    }
    std::set<int64_t> expected(want.accounting_equation_failures.begin(),
                               want.accounting_equation_failures.end());
    if (!ok || found != expected) differs(key, JsonText(v));
  };
  auto compare_bad_cells = [&](const std::string& key) {
    const json& v = Field(got, key);
    using Cell = std::tuple<int64_t, std::string, std::string>;
    std::set<Cell> found, expected;
    bool ok = v.is_array();
    for (const json& e : ok ? v : json::array()) {
      std::optional<int64_t> row = IntegerJson(Field(e, "row"));
      const json& column = Field(e, "column");
      const json& value = Field(e, "value");
      if (!row.has_value() || !column.is_string() || !value.is_string()) {
        ok = false;
        continue;
      }
      found.emplace(*row, column.get<std::string>(), value.get<std::string>());
    }
    for (const BadCell& c : want.bad_cells) expected.emplace(c.row, c.column, c.value);
    if (want.bad_cell_count > want.bad_cells.size()) {
      // The daemon listed only the first cells: those must be there, and as many in all,
      // either listed or (the contract's bound on the manifest's size) counted in
      // bad_cell_count next to the first kMaxBadCells.
      std::optional<int64_t> count = IntegerJson(Field(got, "bad_cell_count"));
      bool counted = count == std::optional<int64_t>(want.bad_cell_count) && found == expected;
      bool listed = v.size() == want.bad_cell_count &&
                    std::includes(found.begin(), found.end(), expected.begin(), expected.end());
      ok = ok && (counted || listed);
    } else {
      ok = ok && found == expected;
    }
    if (!ok) differs(key, JsonText(v));
  };

  compare_bool("required_columns_present");
  compare_strings("missing_columns");
  compare_bool("all_values_numeric");
  compare_bad_cells("bad_cells");
  compare_bool("years_unique");
  // After a fatal failure only the fatal keys are compared: which rows a program still looks
  // at once it knows the input is unusable is not part of the contract.
  if (!want.fatal()) {
    compare_bool("years_ordered");
    compare_bool("accounting_equation_passed_every_row");
    compare_years("accounting_equation_failures");
    compare_bool("at_least_two_years");
  }
  return problems;
}

void CheckManifest(absl::string_view input_filename, absl::string_view text,
                   const ValidationReport& report, std::vector<Check>* out) {
  json manifest = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> problems;
  if (manifest.is_discarded()) {
    problems.push_back("not valid JSON");
  } else if (!manifest.is_object()) {
    problems.push_back(absl::StrCat("not a JSON object: ", JsonText(manifest)));
  }
  out->push_back(Result("analysis_run.parses", problems, "a JSON object"));
  if (!problems.empty()) return;

  // Keys and their types.
  problems.clear();
  auto has = [&](const char* key, bool (json::*is)() const noexcept, const char* type) {
    if (!manifest.contains(key)) {
      problems.push_back(absl::StrCat("missing key ", key));
      return false;
    }
    if (!(manifest[key].*is)()) {
      problems.push_back(absl::StrCat(key, " is not ", type, ": ", JsonText(manifest[key])));
      return false;
    }
    return true;
  };
  bool has_name = has("input_filename", &json::is_string, "a string");
  bool has_rows = has("row_count", &json::is_number, "a number");
  bool has_range = manifest.contains("year_range");
  if (!has_range) problems.push_back("missing key year_range");
  bool has_results = has("validation_results", &json::is_object, "an object");
  bool has_generated = has("generated_filenames", &json::is_array, "an array");
  has("execution_directory", &json::is_string, "a string");
  if (has_results) {
    for (const std::string& key : ValidationKeys()) {
      if (!manifest["validation_results"].contains(key)) {
        problems.push_back(absl::StrCat("validation_results lacks ", key));
      }
    }
  }
  out->push_back(Result("analysis_run.keys", problems, "every key, with the right types"));

  if (has_name) {
    problems.clear();
    std::string name = manifest["input_filename"].get<std::string>();
    if (name != input_filename) {
      problems.push_back(absl::StrCat("input_filename is \"", Excerpt(name, 80), "\", expected \"",
                                      Excerpt(input_filename, 80), "\""));
    }
    out->push_back(Result("analysis_run.input_filename", problems, "names the input"));
  }
  if (has_rows) {
    problems.clear();
    std::optional<int64_t> rows = IntegerJson(manifest["row_count"]);
    if (rows != std::optional<int64_t>(report.row_count)) {
      problems.push_back(absl::StrCat("row_count is ", JsonText(manifest["row_count"]),
                                      ", the input has ", report.row_count, " data rows"));
    }
    out->push_back(
        Result("analysis_run.row_count", problems, absl::StrCat(report.row_count, " rows")));
  }
  if (has_range) {
    problems.clear();
    const json& range = manifest["year_range"];
    std::string expected =
        report.year_range.has_value()
            ? absl::StrCat("[", report.year_range->first, ", ", report.year_range->second, "]")
            : "null";
    bool ok;
    if (report.year_range.has_value()) {
      ok = range.is_array() && range.size() == 2 &&
           IntegerJson(range[0]) == std::optional<int64_t>(report.year_range->first) &&
           IntegerJson(range[1]) == std::optional<int64_t>(report.year_range->second);
    } else {
      ok = range.is_null();
    }
    if (!ok) {
      problems.push_back(absl::StrCat("year_range is ", JsonText(range), ", expected ", expected));
    }
    out->push_back(Result("analysis_run.year_range", problems, expected));
  }
  if (has_results) {
    out->push_back(Result("analysis_run.validation_matches",
                          CompareValidation(manifest["validation_results"], report),
                          "validation_results agree with the daemon's"));
  }
  if (has_generated && !report.fatal()) {
    problems.clear();
    std::set<std::string> listed;
    for (const json& e : manifest["generated_filenames"]) {
      if (e.is_string()) listed.insert(e.get<std::string>());
    }
    std::vector<std::string> missing;
    for (const std::string& name : ArtifactNames()) {
      if (name != kManifestFile && !listed.count(name)) missing.push_back(name);
    }
    if (!missing.empty()) {
      problems.push_back(absl::StrCat("generated_filenames lacks ", absl::StrJoin(missing, ", ")));
    }
    out->push_back(
        Result("analysis_run.generated_filenames", problems, "lists the generated files"));
  }
}

}  // namespace

const std::vector<std::string>& ArtifactNames() {
  static const auto* const kNames = new std::vector<std::string>{
      kScriptFile, kMetricsFile, kMovementsFile, kMemoFile, kChartFile, kManifestFile};
  return *kNames;
}

const std::vector<std::string>& MemoHeadings() {
  static const auto* const kHeadings = new std::vector<std::string>{
      "Executive view",
      "KPI table",
      "Profitability",
      "Liquidity and leverage",
      "Cash flow and earnings quality",
      "Unusual movements",
      "Bull case",
      "Bear case",
      "Diligence questions",
      "Data limitations",
      "Conclusion",
  };
  return *kHeadings;
}

const std::vector<std::string>& ManifestKeys() {
  static const auto* const kKeys = new std::vector<std::string>{
      "input_filename",     "row_count",           "year_range",
      "validation_results", "generated_filenames", "execution_directory",
  };
  return *kKeys;
}

std::vector<Check> Verify(absl::string_view input_filename, absl::string_view input_csv,
                          const Artifacts& artifacts, v1::RunSummary* summary) {
  std::vector<Check> checks;
  ValidationReport report;
  absl::StatusOr<Statements> statements = LoadStatements(input_csv, &report);
  {
    Check c;
    c.name = "input.valid";
    c.passed = statements.ok();
    c.detail = statements.ok() ? absl::StrCat(report.row_count, " rows",
                                              report.warnings.empty() ? "" : "; warnings: ",
                                              absl::StrJoin(report.warnings, "; "))
                               : std::string(statements.status().message());
    c.detail = Excerpt(c.detail, 2000);
    checks.push_back(std::move(c));
  }

  // Present and non-empty; the content checks below run only on these.
  std::map<std::string, absl::string_view> usable;
  for (const std::string& name : ArtifactNames()) {
    auto it = artifacts.find(name);
    std::vector<std::string> problems;
    if (it == artifacts.end()) {
      problems.push_back(absl::StrCat(name, " is missing"));
    } else if (it->second.empty()) {
      problems.push_back(absl::StrCat(name, " is empty"));
    } else {
      usable[name] = it->second;
    }
    checks.push_back(
        Result(absl::StrCat("artifact.", name), problems,
               it == artifacts.end() ? "" : absl::StrCat(it->second.size(), " bytes")));
  }

  if (usable.count(kManifestFile)) {
    CheckManifest(input_filename, usable[kManifestFile], report, &checks);
  }
  // The daemon's own figures, computed once: the checks compare the files with them and the
  // summary shows them.
  std::vector<MetricsRow> metrics;
  std::vector<UnusualMovement> hits;
  if (statements.ok()) {
    metrics = ComputeMetrics(*statements);
    hits = FindUnusualMovements(*statements);
    if (usable.count(kMetricsFile)) CheckMetrics(metrics, usable[kMetricsFile], &checks);
    if (usable.count(kMovementsFile)) CheckMovements(hits, usable[kMovementsFile], &checks);
  }
  if (usable.count(kMemoFile)) CheckMemo(input_filename, usable[kMemoFile], &checks);
  if (usable.count(kChartFile)) CheckChart(usable[kChartFile], &checks);
  if (summary != nullptr) {
    std::vector<std::string> present;
    for (const auto& [name, bytes] : usable) present.push_back(name);
    *summary = Summarize(input_filename, metrics, hits, present, checks);
  }
  return checks;
}

}  // namespace sandgate::playbooks::financial
