// The `openai` agent on a session whose agent loop runs upstream (sandbox::HostedAgent, the
// openai-agents provider): the Agents API runs the model's turn and its commands itself, so
// sandgate gives it the brief and relays what happens (agent/agents_events.h).
//
// The brief is the playbook's Instructions for /workspace, where the inputs are, and says that
// only files under /workspace/outputs come back: every file the task asks for goes there. One
// turn does the task (the harness chooses its own rounds: AgentTask.max_turns does not apply).
//
// Thread safe (no state of its own).
#ifndef SANDGATE_AGENT_AGENTS_RUN_H_
#define SANDGATE_AGENT_AGENTS_RUN_H_

#include <string>

#include "absl/status/status.h"
#include "agent/agent.h"
#include "sandbox/sandbox.h"

namespace sandgate::agent {

// The brief the Agents API's agent gets for `task` (instructions and the first message).
sandbox::HostedAgent::Task HostedAgentTask(const AgentTask& task, const std::string& model);

// OK once the turn completed; the mapper's error when the API said the run cannot go on (a
// reset or expired environment, a failed turn); CANCELLED when `cancel` fired.
absl::Status RunHostedAgent(sandbox::HostedAgent& hosted, const AgentTask& task,
                            const std::string& model, EventSink& events, const CancelToken& cancel);

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_AGENTS_RUN_H_
