#include "common/events.h"

#include <utility>

namespace sandgate::events {
namespace {

// Sets the type from the payload just set.
v1::Event Typed(v1::Event e) {
  e.set_type(std::string(TypeOf(e.payload_case())));
  return e;
}

}  // namespace

absl::string_view TypeOf(v1::Event::PayloadCase payload) {
  // No default: a payload case added to the proto without a type here fails the build.
  switch (payload) {
    case v1::Event::kHeartbeat:
      return "heartbeat";
    case v1::Event::kRunQueued:
      return "run.queued";
    case v1::Event::kRunStarted:
      return "run.started";
    case v1::Event::kSessionCreated:
      return "session.created";
    case v1::Event::kSessionClosed:
      return "session.closed";
    case v1::Event::kStepStarted:
      return "step.started";
    case v1::Event::kStepFinished:
      return "step.finished";
    case v1::Event::kCommandStarted:
      return "command.started";
    case v1::Event::kCommandOutput:
      return "command.output";
    case v1::Event::kCommandFinished:
      return "command.finished";
    case v1::Event::kFileTransferred:
      return "file.transferred";
    case v1::Event::kArtifactCollected:
      return "artifact.collected";
    case v1::Event::kCheck:
      return "check";
    case v1::Event::kNotice:
      return "notice";
    case v1::Event::kAgentMessage:
      return "agent_message";
    case v1::Event::kTokenUsage:
      return "token_usage";
    case v1::Event::kRunFinished:
      return "run.finished";
    case v1::Event::kNetwork:
      return "network.decision";
    case v1::Event::kSessionExpiring:
      return "session.expiring";
    case v1::Event::kEventsDropped:
      return "events.dropped";
    case v1::Event::PAYLOAD_NOT_SET:
      return "";
  }
  return "";
}

v1::Event Heartbeat() {
  v1::Event e;
  e.mutable_heartbeat();
  return Typed(std::move(e));
}

v1::Event RunQueued(uint32_t position) {
  v1::Event e;
  e.mutable_run_queued()->set_position(position);
  return Typed(std::move(e));
}

v1::Event RunStarted(std::string playbook, std::string provider, std::string agent,
                     std::string model) {
  v1::Event e;
  v1::RunStarted* p = e.mutable_run_started();
  p->set_playbook(std::move(playbook));
  p->set_provider(std::move(provider));
  p->set_agent(std::move(agent));
  p->set_model(std::move(model));
  return Typed(std::move(e));
}

v1::Event SessionCreated(v1::SessionCreated created) {
  v1::Event e;
  *e.mutable_session_created() = std::move(created);
  return Typed(std::move(e));
}

v1::Event SessionClosed(std::string session_id, std::string reason) {
  v1::Event e;
  e.mutable_session_closed()->set_session_id(std::move(session_id));
  e.mutable_session_closed()->set_reason(std::move(reason));
  return Typed(std::move(e));
}

v1::Event StepStarted(std::string name, std::string description) {
  v1::Event e;
  e.mutable_step_started()->set_name(std::move(name));
  e.mutable_step_started()->set_description(std::move(description));
  return Typed(std::move(e));
}

v1::Event StepFinished(v1::StepFinished finished) {
  v1::Event e;
  *e.mutable_step_finished() = std::move(finished);
  return Typed(std::move(e));
}

v1::Event CommandStarted(uint32_t command_id, std::string step,
                         const std::vector<std::string>& argv) {
  v1::Event e;
  v1::CommandStarted* p = e.mutable_command_started();
  p->set_command_id(command_id);
  p->set_step(std::move(step));
  for (const std::string& arg : argv) p->add_argv(arg);
  return Typed(std::move(e));
}

v1::Event CommandOutput(uint32_t command_id, v1::CommandOutput::Stream stream, std::string data) {
  v1::Event e;
  v1::CommandOutput* p = e.mutable_command_output();
  p->set_command_id(command_id);
  p->set_stream(stream);
  p->set_data(std::move(data));
  return Typed(std::move(e));
}

v1::Event CommandFinished(v1::CommandFinished finished) {
  v1::Event e;
  *e.mutable_command_finished() = std::move(finished);
  return Typed(std::move(e));
}

v1::Event FileTransferred(v1::FileTransferred::Direction direction, std::string path,
                          uint64_t size_bytes) {
  v1::Event e;
  v1::FileTransferred* p = e.mutable_file_transferred();
  p->set_direction(direction);
  p->set_path(std::move(path));
  p->set_size_bytes(size_bytes);
  return Typed(std::move(e));
}

v1::Event ArtifactCollected(v1::Artifact artifact) {
  v1::Event e;
  *e.mutable_artifact_collected()->mutable_artifact() = std::move(artifact);
  return Typed(std::move(e));
}

v1::Event Check(v1::CheckResult check) {
  v1::Event e;
  *e.mutable_check() = std::move(check);
  return Typed(std::move(e));
}

v1::Event Notice(v1::Notice::Severity severity, std::string message) {
  v1::Event e;
  e.mutable_notice()->set_severity(severity);
  e.mutable_notice()->set_message(std::move(message));
  return Typed(std::move(e));
}

v1::Event AgentMessage(std::string role, std::string text) {
  v1::Event e;
  e.mutable_agent_message()->set_role(std::move(role));
  e.mutable_agent_message()->set_text(std::move(text));
  return Typed(std::move(e));
}

v1::Event TokenUsage(uint64_t input_tokens, uint64_t output_tokens, uint64_t total_tokens) {
  v1::Event e;
  v1::TokenUsage* p = e.mutable_token_usage();
  p->set_input_tokens(input_tokens);
  p->set_output_tokens(output_tokens);
  p->set_total_tokens(total_tokens);
  return Typed(std::move(e));
}

v1::Event RunFinished(v1::RunStatus status, std::string reason,
                      std::vector<std::string> failed_checks, const v1::RunSummary* summary) {
  v1::Event e;
  v1::RunFinished* p = e.mutable_run_finished();
  p->set_status(status);
  p->set_reason(std::move(reason));
  for (std::string& name : failed_checks) p->add_failed_checks(std::move(name));
  if (summary != nullptr) *p->mutable_summary() = *summary;
  return Typed(std::move(e));
}

v1::Event NetworkDecision(v1::NetworkDecision decision) {
  v1::Event e;
  *e.mutable_network() = std::move(decision);
  return Typed(std::move(e));
}

v1::Event SessionExpiring(v1::SessionExpiring expiring) {
  v1::Event e;
  *e.mutable_session_expiring() = std::move(expiring);
  return Typed(std::move(e));
}

v1::Event EventsDropped(v1::EventsDropped dropped) {
  v1::Event e;
  *e.mutable_events_dropped() = std::move(dropped);
  return Typed(std::move(e));
}

}  // namespace sandgate::events
