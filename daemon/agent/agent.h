// Agent: what drives the work inside a session.
//
// An agent is handed a playbook, the run's inputs (already placed in the workspace), a live
// session and an event sink; it does the task and returns. It does not collect or verify
// artifacts — the run manager does, the same way for every agent, so a model cannot grade
// its own work.
//
// Implementations: ReferenceAgent (the playbook's own program, no model); later the model
// driven `openai` and `chat` agents. Thread safe: one Agent object serves many runs at once.
#ifndef SANDGATE_AGENT_AGENT_H_
#define SANDGATE_AGENT_AGENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "playbooks/playbook.h"
#include "sandbox/sandbox.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::agent {

// Where a run's events go. Emit fills in run id, seq and time. Thread safe.
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void Emit(v1::Event event) = 0;
  // The run's next command id (1, 2, …), shared by setup commands and the agent.
  virtual uint32_t NextCommandId() = 0;
};

struct AgentTask {
  const playbooks::Playbook* playbook = nullptr;              // not owned; outlives the call
  const std::vector<playbooks::InputFile>* inputs = nullptr;  // not owned
  const playbooks::TaskSettings* settings = nullptr;          // not owned
  std::string model;
  uint32_t max_turns = 0;
  absl::Duration command_timeout = absl::Minutes(5);
};

class Agent {
 public:
  virtual ~Agent() = default;
  virtual std::string name() const = 0;
  // Whether it can work in a sandbox whose provider does not run commands
  // (Provider::runs_commands): only an agent whose commands run upstream can.
  virtual bool works_without_exec() const { return false; }
  // OK when the agent believes the task is done. CANCELLED when `cancel` fired; any other
  // error fails the run with its message.
  virtual absl::Status Run(const AgentTask& task, sandbox::Session& session, EventSink& events,
                           const CancelToken& cancel) = 0;
};

// Runs one command in the session and reports it as events: command.started, its output as
// it is produced (command.output), command.finished.
absl::StatusOr<sandbox::ExecResult> ExecWithEvents(sandbox::Session& session, EventSink& events,
                                                   const std::string& step,
                                                   const sandbox::ExecRequest& request,
                                                   const CancelToken& cancel);

// The API's view of how a command ended (command_id left 0), and of an output stream.
v1::CommandFinished ToCommandFinished(const sandbox::ExecResult& result);
v1::CommandOutput::Stream ToProto(sandbox::OutputStream stream);

// "exited with status 2", "killed by signal 9 (out of memory)", "timed out after 30s", …
std::string DescribeExit(const sandbox::ExecResult& result, absl::Duration timeout);

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_AGENT_H_
