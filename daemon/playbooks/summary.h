// Builders for the summary a playbook returns with its checks (sandgate.v1.RunSummary): the
// figures, flags, counts and files a client shows without knowing the playbook.
//
//   v1::RunSummary s;
//   *s.add_metrics() = SummaryNumber("gross_margin", 0.4123, Unit::kPercent);  // "41.2%"
//   *s.add_metrics() = SummaryText("kernel", "6.1.0");
//   CountChecks(checks, &s);  // "checks passed", "checks failed"
//
// Plain functions; thread safe.
#ifndef SANDGATE_PLAYBOOKS_SUMMARY_H_
#define SANDGATE_PLAYBOOKS_SUMMARY_H_

#include <optional>
#include <string>
#include <vector>

#include "playbooks/playbook.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::playbooks {

// How a value is shown. A ratio (0.1234) becomes a percentage (12.3%) or, for a difference
// of two ratios, percentage points (+1.2 pp); kPlain keeps the number in the file's units.
enum class Unit { kPlain, kPercent, kPoints };

// `value` as a ratio or plain number (nullopt: undefined), converted to `unit`.
v1::RunSummary::Metric SummaryNumber(std::string label, std::optional<double> value, Unit unit);
v1::RunSummary::Metric SummaryText(std::string label, std::string text);

// Appends "checks passed" and "checks failed".
void CountChecks(const std::vector<Check>& checks, v1::RunSummary* summary);

void AddCount(std::string label, uint64_t value, v1::RunSummary* summary);
void AddFile(std::string role, std::string name, v1::RunSummary* summary);

}  // namespace sandgate::playbooks

#endif  // SANDGATE_PLAYBOOKS_SUMMARY_H_
