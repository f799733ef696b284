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
#include "playbooks/financial_analyst/check_result.h"
#include "playbooks/financial_analyst/manifest_check.h"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/summary.h"
#include "playbooks/financial_analyst/svg_check.h"
#include "playbooks/financial_analyst/text.h"

namespace sandgate::playbooks::financial {
namespace {

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
