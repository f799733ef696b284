#include "agent/agents_run.h"

#include "absl/strings/str_cat.h"
#include "agent/agents_events.h"
#include "common/errors.h"

namespace sandgate::agent {
namespace {

constexpr char kWorkspace[] = "/workspace";
constexpr char kOutputs[] = "/workspace/outputs";

}  // namespace

sandbox::HostedAgent::Task HostedAgentTask(const AgentTask& task, const std::string& model) {
  sandbox::HostedAgent::Task t;
  t.model = model;
  t.instructions = absl::StrCat(
      task.playbook->Instructions(*task.inputs, kWorkspace, *task.settings),
      "\n\n# Where files go on this sandbox\n\nThe input files are in ", kWorkspace,
      ". Only files under ", kOutputs,
      " come back when you are done: write every file this task asks for there (mkdir -p ",
      kOutputs, "; cd ", kOutputs, "), including the programs, and read the inputs from ",
      kWorkspace, ".");
  t.input = absl::StrCat("Do the task now, with shell commands. Write every file it asks for into ",
                         kOutputs, ". When every file is written, reply with a short summary.");
  return t;
}

absl::Status RunHostedAgent(sandbox::HostedAgent& hosted, const AgentTask& task,
                            const std::string& model, EventSink& events,
                            const CancelToken& cancel) {
  AgentsEventMapper mapper(events);
  absl::Status st = hosted.Run(
      HostedAgentTask(task, model),
      [&mapper](const nlohmann::json& event) { return mapper.OnEvent(event); }, cancel);
  mapper.AbortOpen(cancel.cancelled());
  mapper.Finish(model);
  if (cancel.cancelled()) return errors::Cancelled(cancel.reason());
  return st;
}

}  // namespace sandgate::agent
