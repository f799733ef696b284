// The summary `sandgate run` prints after a run: what the daemon's playbook put in the run's
// RunSummary (key figures, flags, counts, where the files are), shown the same way whatever
// the playbook. The CLI knows no playbook: a new one, or new figures, need no CLI change.
//
//   std::string text = RenderSummary(run.summary(), "sandgate-run-1234");
//
// Every text is shown through TerminalSafe: a playbook may quote what the sandbox wrote.
// Plain functions; thread safe.
#ifndef SANDGATE_CLIENT_SUMMARY_H_
#define SANDGATE_CLIENT_SUMMARY_H_

#include <string>

#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::cli {

// A value with its unit ("12.3%", "+2.5 pp", "1234.00", a text, or "n/a" when undefined);
// `signed_change` shows the sign of a positive number too.
std::string FormatMetric(const v1::RunSummary::Metric& m, bool signed_change = false);

// The summary's lines, each ending in '\n', starting with an empty line; empty for an empty
// summary. Files are shown under `dir` (where they were downloaded) when it is not empty.
std::string RenderSummary(const v1::RunSummary& summary, const std::string& dir);

}  // namespace sandgate::cli

#endif  // SANDGATE_CLIENT_SUMMARY_H_
