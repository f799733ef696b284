// The "financial-analyst" playbook (docs/financial-analyst.md): one CSV of yearly
// statements in; six artifacts out, verified by recomputing every metric in the daemon.
//
// Thread safe: stateless, every method const.
#ifndef SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_PLAYBOOK_H_
#define SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_PLAYBOOK_H_

#include <cstddef>
#include <string>
#include <vector>

#include "playbooks/playbook.h"

namespace sandgate::playbooks {

class FinancialAnalystPlaybook : public Playbook {
 public:
  static constexpr char kName[] = "financial-analyst";
  static constexpr size_t kMaxInputBytes = 64u << 20;
  static constexpr size_t kMaxNameBytes = 255;

  std::string name() const override { return kName; }
  // Exactly one input: a plain file name ending in .csv (no '/', no leading '.' or '-', at most
  // 255 bytes, UTF-8 without control characters) with 1 byte to 64 MiB of UTF-8 content.
  // INVALID_ARGUMENT names the file and the problem. The CSV's own validation is the run's
  // business (a fatal CSV still gets analysis_run.json explaining why).
  absl::Status ValidateInputs(const std::vector<InputFile>& inputs) const override;
  std::vector<std::string> ExpectedArtifacts() const override;
  // Places analyze_financials.py and recompute_metrics.py (embedded at build time) and runs
  // "analyze" then "recompute" on the input.
  ReferencePlan Reference(const std::vector<InputFile>& inputs, const std::string& workdir,
                          const TaskSettings& settings) const override;
  std::string Instructions(const std::vector<InputFile>& inputs, const std::string& workdir,
                           const TaskSettings& settings) const override;
  Verdict Verify(const std::vector<InputFile>& inputs, const TaskSettings& settings,
                 const Artifacts& artifacts) const override;
};

}  // namespace sandgate::playbooks

#endif  // SANDGATE_PLAYBOOKS_FINANCIAL_ANALYST_PLAYBOOK_H_
