// The sandbox-probe playbook: the environment checks a team runs before trusting a sandbox.
//
// The probe (reference/sandbox_probe.py) records the OS and kernel, the working directory,
// Python and Node versions, whether each input is readable and intact, whether the requested
// environment variables are visible, what the setup commands left, and what a network probe
// got; it writes sandbox-report.md and checks.json. The daemon then verifies both against
// what the caller asked for — in particular, with the network disabled, a probe that reached
// the network fails the run.
//
// Thread safe (stateless).
#ifndef SANDGATE_PLAYBOOKS_SANDBOX_PROBE_PLAYBOOK_H_
#define SANDGATE_PLAYBOOKS_SANDBOX_PROBE_PLAYBOOK_H_

#include <string>
#include <vector>

#include "playbooks/playbook.h"

namespace sandgate::playbooks {

class SandboxProbePlaybook : public Playbook {
 public:
  std::string name() const override { return "sandbox-probe"; }
  absl::Status ValidateInputs(const std::vector<InputFile>& inputs) const override;
  std::vector<std::string> ExpectedArtifacts() const override;
  ReferencePlan Reference(const std::vector<InputFile>& inputs, const std::string& workdir,
                          const TaskSettings& settings) const override;
  std::string Instructions(const std::vector<InputFile>& inputs, const std::string& workdir,
                           const TaskSettings& settings) const override;
  Verdict Verify(const std::vector<InputFile>& inputs, const TaskSettings& settings,
                 const Artifacts& artifacts) const override;
};

}  // namespace sandgate::playbooks

#endif  // SANDGATE_PLAYBOOKS_SANDBOX_PROBE_PLAYBOOK_H_
