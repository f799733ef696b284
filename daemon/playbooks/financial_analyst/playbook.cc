#include "playbooks/financial_analyst/playbook.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/errors.h"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/reference_files.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/financial_analyst/text.h"
#include "playbooks/financial_analyst/verifier.h"
#include "playbooks/summary.h"

namespace sandgate::playbooks {
namespace {

namespace fin = financial;

absl::Status BadInput(absl::string_view name, absl::string_view problem) {
  return errors::InvalidArgument(absl::StrCat("input \"", fin::Excerpt(name, 80), "\": ", problem));
}

std::string InputName(const std::vector<InputFile>& inputs) {
  return inputs.empty() ? std::string() : inputs[0].name;
}

// The agent's brief. {{WORKDIR}}, {{INPUT}}, {{...}} are filled in by Instructions().
constexpr char kInstructions[] =
    R"text(You are a skeptical financial analyst. A company's yearly financial statements are in the CSV file {{INPUT}} in your working directory {{WORKDIR}}. Analyse them inside this sandbox and leave six files in {{WORKDIR}}. Trust nothing you have not checked with code.

# How to work

- Do every calculation with code you run here (python3 and its standard library are enough). Never compute, round or copy a number in your head; every figure in your files must come out of a program you ran.
- Look at the data before analysing it: print the header and the rows, then validate them (below). State what you found.
- Write one program, analyze_financials.py, that reads {{INPUT}} and writes the other five files, and run it: python3 analyze_financials.py {{INPUT}} --out-dir .
- Inspect every file you produced: print the CSVs, read the memo back, parse the SVG as XML and the JSON with a parser. Fix what is wrong and rerun.
- Then, in a second, separate command, recompute revenue_growth, operating_margin and free_cash_flow for the latest year with a fresh short script that reads {{INPUT}} on its own (do not import analyze_financials.py), and compare them with that year's row of calculated_metrics.csv. If they disagree, find out which is wrong and fix it.
- Do not stop until all six files exist in {{WORKDIR}}, are non-empty, and you have inspected them. If the input fails a fatal check, still write analysis_run.json with the failing validation_results and say why.

# Input

The file can be as large as 64 MiB and 100,000 rows: read it as a stream (csv.reader over the open file), keep only numbers per row (floats, or array('d') per column), never a list of dicts per row, and write the output files as you compute them; the sandbox has 1 GiB of memory.

One row per fiscal year, a header in the first row, plain numbers (units are the file's own). Required columns (any order): {{REQUIRED}}. Optional columns used when present: gross_profit (otherwise gross profit = revenue - cost_of_revenue), deferred_revenue, stock_based_compensation, long_term_debt, cash_and_equivalents. Keep any other columns: they are analysed like the rest.

# Validation (record each result under its key in analysis_run.json's validation_results)

- required_columns_present (+ missing_columns: list of names) -- fatal when false.
- all_values_numeric: every cell of a required column is a finite number (+ bad_cells: list of {"row": data row number counting from 1 after the header, "column": name, "value": the cell as written}; past 1000 bad cells list the first 1000 in file order and add "bad_cell_count": the total) -- fatal when false.
- years_unique: years are integers and unique -- fatal when false.
- years_ordered: years ascending in the file; if not, sort the rows by year and report false.
- accounting_equation_passed_every_row: total_assets = total_liabilities + shareholders_equity within max(1, 1e-6 * abs(total_assets)) (+ accounting_equation_failures: list of the failing years).
- at_least_two_years: at least two rows (otherwise growth metrics stay blank).

# The six files

1. analyze_financials.py -- the program that produced the other files, so the analysis can be rerun.

2. calculated_metrics.csv -- one row per year, ascending, with exactly these columns in this order:
   {{METRIC_COLUMNS}}
   Ratios are decimals (0.1234, not 12.34%) with 6 to 10 significant digits (Python: "%.10g"; never rounded to 2-4 decimals, and no longer than that: the file must stay under the 32 MiB artifact cap at 100,000 rows). Leave a cell empty when the value is undefined: a denominator that is zero or missing, or no previous year. t = this year, p = the previous row after sorting by year; growth(x) = (x_t - x_p) / abs(x_p).
   revenue_growth = growth(revenue); gross_margin = gross_profit / revenue; operating_margin = operating_income / revenue; net_margin = net_income / revenue; current_ratio = total_current_assets / total_current_liabilities; quick_ratio = (total_current_assets - inventory) / total_current_liabilities; liabilities_to_equity = total_liabilities / shareholders_equity; roa = net_income / ((total_assets_t + total_assets_p) / 2); roe = net_income / ((shareholders_equity_t + shareholders_equity_p) / 2); interest_coverage = operating_income / interest_expense; free_cash_flow = operating_cash_flow - abs(capital_expenditures); fcf_margin = free_cash_flow / revenue; cash_conversion = operating_cash_flow / net_income; receivables_growth = growth(accounts_receivable); inventory_growth = growth(inventory).

3. unusual_movements.csv -- columns exactly: {{MOVEMENT_COLUMNS}}. One row per hit of these rules, comparing unrounded values with 1e-12 of slack:
   - yoy_move_15pct: abs(growth(x)) >= 0.15 for every numeric input column x except year (including optional and extra columns); item = the column name; change = growth(x).
   - operating_margin_2pp: abs(operating_margin_t - operating_margin_p) >= 0.02; item = operating_margin; change = the difference.
   - receivables_outpace_revenue_10pp: receivables_growth - revenue_growth >= 0.10; item = accounts_receivable; change = the difference.
   Order rows by year, then rule in the order above, then item in the input's column order. previous_value and current_value are the two values compared; detail is a short sentence.

4. investment_analysis.md -- a memo in Markdown with exactly these second-level headings ("## "), in this order: {{HEADINGS}}. Tie receivables, deferred revenue, stock-based compensation, capital expenditures and interest expense to the figures, cite the input file name {{INPUT}} and the years for every figure, and mark each statement as a fact (from the data) or a hypothesis (your interpretation).

5. financial_trends.svg -- a standalone, well-formed SVG, under 1 MiB whatever the row count (above 200 years, plot an evenly spaced sample that includes the first and last year, and say on the chart and in the memo how many years are plotted), with four titled panels with labelled axes: revenue and net income; gross, operating and net margins; operating cash flow, capex and free cash flow; receivables growth against revenue growth. Put each panel in its own <g class="panel"> with a <title> child or a <text class="panel-title"> as its title; write text as real <text> elements (with matplotlib: rcParams["svg.fonttype"] = "none"). No scripts, no event attributes, no links or references outside the file (href only to "#id"), no <image>, no <foreignObject>, no url() other than url(#id).

6. analysis_run.json -- {"input_filename": "{{INPUT}}", "row_count": <data rows>, "year_range": [<first year>, <last year>], "validation_results": {<every key above>}, "generated_filenames": [<the six file names>], "execution_directory": "<where you ran>"}.

# What happens next

The daemon recomputes the validation, every metric and every unusual movement from {{INPUT}} itself and rejects the run if any file is missing or empty, a metric differs by more than 1e-6 relative (or 1e-9 absolute), an empty cell is not undefined or the reverse, the set of (year, item, rule) hits differs, a heading is missing or out of order, the memo does not name {{INPUT}}, or the SVG is not well-formed, has fewer than four titled panels, or holds a script or an external reference.
)text";

}  // namespace

absl::Status FinancialAnalystPlaybook::ValidateInputs(const std::vector<InputFile>& inputs) const {
  if (inputs.size() != 1) {
    return errors::InvalidArgument(absl::StrCat(
        "inputs: the ", kName, " playbook takes exactly one CSV file, got ", inputs.size()));
  }
  const InputFile& in = inputs[0];
  const std::string& name = in.name;
  if (name.empty()) return errors::InvalidArgument("inputs[0]: the file name is empty");
  if (name.size() > kMaxNameBytes) {
    return BadInput(name,
                    absl::StrCat("the name is ", name.size(), " bytes, more than ", kMaxNameBytes));
  }
  if (!fin::IsValidUtf8(name)) return BadInput(name, "the name is not valid UTF-8");
  for (char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      return BadInput(name, "the name holds a control character");
    }
  }
  if (absl::StrContains(name, '/')) {
    return BadInput(name, "the name must be a plain file name, without '/'");
  }
  if (name[0] == '.') return BadInput(name, "the name must not start with '.'");
  // A leading '-' would read as an option on the reference program's command line.
  if (name[0] == '-') return BadInput(name, "the name must not start with '-'");
  if (name.size() <= 4 || !absl::EndsWithIgnoreCase(name, ".csv")) {
    return BadInput(name, "the name must end in .csv");
  }
  if (in.content.empty()) return BadInput(name, "the file is empty");
  if (in.content.size() > kMaxInputBytes) {
    return BadInput(
        name, absl::StrCat("the file is ", in.content.size(), " bytes, more than the limit of ",
                           kMaxInputBytes, " (64 MiB)"));
  }
  if (!fin::IsValidUtf8(in.content)) return BadInput(name, "the file is not valid UTF-8");
  // Refused here rather than failed after a sandbox ran: past this many rows the metrics file
  // could exceed the artifact cap (statements.h says why).
  fin::CsvReader reader(in.content);
  size_t records = 0;
  bool blank = false;
  while (reader.Skip(&blank)) {
    if (!blank && ++records > fin::kMaxDataRows + 1) {
      return BadInput(name, absl::StrCat("more than ", fin::kMaxDataRows, " data rows (CSV line ",
                                         reader.record_line(),
                                         "): the financial-analyst playbook's row limit"));
    }
  }
  // The fatal checks the verifier would fail the run on after the agent's whole conversation
  // (a missing column, a cell that is not a number, a duplicate year): refused here, before
  // any sandbox or model call is paid for, with what LoadStatements names (column, row, year).
  fin::ValidationReport report;
  absl::StatusOr<fin::Statements> statements = fin::LoadStatements(in.content, &report);
  if (!statements.ok()) return BadInput(name, statements.status().message());
  return absl::OkStatus();
}

std::vector<std::string> FinancialAnalystPlaybook::ExpectedArtifacts() const {
  return fin::ArtifactNames();
}

ReferencePlan FinancialAnalystPlaybook::Reference(const std::vector<InputFile>& inputs,
                                                  const std::string& /*workdir*/,
                                                  const TaskSettings& /*settings*/) const {
  const std::string input = InputName(inputs);
  ReferencePlan plan;
  plan.files.push_back({fin::kScriptFile,
                        std::string(fin::kAnalyzeFinancialsSource, fin::kAnalyzeFinancialsSize),
                        0644});
  plan.files.push_back({fin::kRecomputeFile,
                        std::string(fin::kRecomputeMetricsSource, fin::kRecomputeMetricsSize),
                        0644});
  Step analyze;
  analyze.name = "analyze";
  analyze.argv = {"python3", fin::kScriptFile, input, "--out-dir", "."};
  Step recompute;
  recompute.name = "recompute";
  recompute.argv = {"python3", fin::kRecomputeFile, input};
  plan.steps = {analyze, recompute};
  return plan;
}

std::string FinancialAnalystPlaybook::Instructions(const std::vector<InputFile>& inputs,
                                                   const std::string& workdir,
                                                   const TaskSettings& /*settings*/) const {
  std::vector<std::string> headings;
  for (const std::string& h : fin::MemoHeadings()) headings.push_back(absl::StrCat("## ", h));
  return absl::StrReplaceAll(kInstructions,
                             {{"{{INPUT}}", InputName(inputs)},
                              {"{{WORKDIR}}", workdir},
                              {"{{REQUIRED}}", absl::StrJoin(fin::RequiredColumns(), ", ")},
                              {"{{METRIC_COLUMNS}}", absl::StrJoin(fin::MetricColumns(), ",")},
                              {"{{MOVEMENT_COLUMNS}}", absl::StrJoin(fin::MovementColumns(), ",")},
                              {"{{HEADINGS}}", absl::StrJoin(headings, "; ")}});
}

Verdict FinancialAnalystPlaybook::Verify(const std::vector<InputFile>& inputs,
                                         const TaskSettings& /*settings*/,
                                         const Artifacts& artifacts) const {
  Verdict verdict;
  if (inputs.size() != 1) {
    Check c;
    c.name = "input.valid";
    c.detail = absl::StrCat("expected exactly one input file, got ", inputs.size());
    verdict.checks = {c};
    CountChecks(verdict.checks, &verdict.summary);
    return verdict;
  }
  verdict.checks = fin::Verify(inputs[0].name, inputs[0].content, artifacts, &verdict.summary);
  return verdict;
}

}  // namespace sandgate::playbooks
