// The summary `sandgate run` prints after a run, read from the artifacts it downloaded.
//
// Those files were written inside the sandbox (by the reference program or a model): every
// cell and value is shown through TerminalSafe. A file that is missing or malformed shows
// less, never fails the command.
//
//   PrintFinancialSummary(stdout, "sandgate-run-1234");
//
// Plain functions; thread safe as far as `out` is.
#ifndef SANDGATE_CLIENT_SUMMARY_H_
#define SANDGATE_CLIENT_SUMMARY_H_

#include <cstdio>
#include <string>

namespace sandgate::cli {

// The latest year's key metrics and that year's unusual movements, from
// calculated_metrics.csv and unusual_movements.csv in `dir`.
void PrintFinancialSummary(FILE* out, const std::string& dir);

// The sandbox-probe's findings, from checks.json in `dir`.
void PrintProbeSummary(FILE* out, const std::string& dir);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_SUMMARY_H_
