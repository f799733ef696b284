// The financial-analyst verifier: the daemon's own judgement of a finished run against the
// contract (docs/financial-analyst.md, "What the daemon checks before it accepts a
// run"). It recomputes the validation, every metric and every unusual movement from the input
// and compares them with the artifacts.
//
//   std::vector<Check> checks = Verify("northstar.csv", csv_bytes, artifacts);
//   bool accepted = std::all_of(checks.begin(), checks.end(),
//                               [](const Check& c) { return c.passed; });
//
// The checks, by stable name, in the order they are returned:
//   input.valid                      the input passes the contract's fatal validation
//   artifact.<file>                  one per expected artifact: present and non-empty
//   analysis_run.parses              a JSON object
//   analysis_run.keys                the contract's keys, with the right types
//   analysis_run.input_filename      the input's name
//   analysis_run.row_count           the number of data rows
//   analysis_run.year_range          [first, last] year (null when there is none)
//   analysis_run.validation_matches  validation_results agree with the daemon's (all keys; on a
//                                    fatal input only the fatal ones and their lists)
//   analysis_run.generated_filenames lists the other five artifacts (valid input only)
//   calculated_metrics.columns       the exact header, in order
//   calculated_metrics.rows          one row per year, ascending
//   calculated_metrics.values        every cell matches within 1e-6 relative or 1e-9 absolute,
//                                    or is the value correctly rounded to 6 significant digits
//                                    (the contract's minimum precision); empty exactly when
//                                    undefined
//   unusual_movements.columns        the exact header, in order
//   unusual_movements.hits           the same set of (year, item, rule)
//   memo.headings                    every required "## " heading, in order
//   memo.cites_input                 the memo names the input file
//   chart.well_formed                XML whose root is <svg>
//   chart.panels                     at least four titled panels (rule: svg_check.h)
//   chart.no_script                  no script, event handler or javascript: URL
//   chart.no_external_refs           no external reference or raster image
// A check that needs an artifact is left out when that artifact is missing or empty (its
// artifact.<file> check fails instead), and so are the chart checks after chart.well_formed
// fails and the metric checks after input.valid fails (there is nothing to compare with).
// analysis_run.* checks other than parses are left out when parses fails.
//
// Thread safe: a pure function. Never crashes on arbitrary artifact bytes.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_VERIFIER_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_VERIFIER_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "playbooks/playbook.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::playbooks::financial {

inline constexpr char kScriptFile[] = "analyze_financials.py";
inline constexpr char kMetricsFile[] = "calculated_metrics.csv";
inline constexpr char kMovementsFile[] = "unusual_movements.csv";
inline constexpr char kMemoFile[] = "investment_analysis.md";
inline constexpr char kChartFile[] = "financial_trends.svg";
inline constexpr char kManifestFile[] = "analysis_run.json";
inline constexpr char kRecomputeFile[] = "recompute_metrics.py";

// The six artifacts, in the contract's order.
const std::vector<std::string>& ArtifactNames();

// The memo's second-level headings, in order.
const std::vector<std::string>& MemoHeadings();

// The keys analysis_run.json must have.
const std::vector<std::string>& ManifestKeys();

// `input_filename` is the plain name the run was given; `input_csv` its bytes. With
// `summary`, also the run's summary (summary.h) from the same recomputation.
std::vector<Check> Verify(absl::string_view input_filename, absl::string_view input_csv,
                          const Artifacts& artifacts, v1::RunSummary* summary = nullptr);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_VERIFIER_H_
