// ReferenceAgent: runs the playbook's own program — no model involved.
//
// It places the playbook's reference files in the workspace and runs its steps in order,
// each as events; a step that does not exit 0 fails the run, naming the step, how it ended
// and the last line it printed to stderr.
//
// Thread safe (stateless).
#ifndef SANDGATE_AGENT_REFERENCE_AGENT_H_
#define SANDGATE_AGENT_REFERENCE_AGENT_H_

#include "agent/agent.h"

namespace sandgate::agent {

class ReferenceAgent : public Agent {
 public:
  std::string name() const override { return "reference"; }
  absl::Status Run(const AgentTask& task, sandbox::Session& session, EventSink& events,
                   const CancelToken& cancel) override;
};

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_REFERENCE_AGENT_H_
