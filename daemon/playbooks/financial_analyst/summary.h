// The financial analyst's summary of a run (sandgate.v1.RunSummary): the latest year's key
// metrics and its unusual movements as the daemon recomputed them from the input, the counts,
// and which artifact is the memo, the chart and the rest.
//
//   std::vector<MetricsRow> metrics = ComputeMetrics(statements);
//   std::vector<UnusualMovement> hits = FindUnusualMovements(statements);
//   v1::RunSummary s = Summarize("northstar.csv", metrics, hits, present, checks);
//
// Thread safe: a pure function.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_SUMMARY_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_SUMMARY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "playbooks/financial_analyst/metrics.h"
#include "playbooks/financial_analyst/statements.h"
#include "playbooks/playbook.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::playbooks::financial {

// The metrics a summary shows, latest year only, in this order.
const std::vector<std::string>& KeyMetrics();

// `metrics` and `hits` are the daemon's own (empty when the input failed validation);
// `present` the artifacts that exist and are non-empty; `checks` every check of the run.
v1::RunSummary Summarize(absl::string_view input_filename, const std::vector<MetricsRow>& metrics,
                         const std::vector<UnusualMovement>& hits,
                         const std::vector<std::string>& present, const std::vector<Check>& checks);

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_SUMMARY_H_
