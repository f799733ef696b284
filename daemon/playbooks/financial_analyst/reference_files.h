// The financial-analyst reference programs, embedded at build time from
// daemon/playbooks/financial_analyst/reference/ (daemon/playbooks/CMakeLists.txt generates the
// definitions). A program missing at build time is replaced by a stub that exits with an error
// saying so, and its k*Embedded flag is false.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_REFERENCE_FILES_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_REFERENCE_FILES_H_

#include <cstddef>

namespace sandgate::playbooks::financial {

// analyze_financials.py: writes the six artifacts.
extern const bool kAnalyzeFinancialsEmbedded;
extern const char kAnalyzeFinancialsSource[];
extern const size_t kAnalyzeFinancialsSize;

// recompute_metrics.py: recomputes three latest-year metrics in a second command.
extern const bool kRecomputeMetricsEmbedded;
extern const char kRecomputeMetricsSource[];
extern const size_t kRecomputeMetricsSize;

}  // namespace sandgate::playbooks::financial

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_REFERENCE_FILES_H_
