// Named event constructors: the one place each event type is built.
//
// An event's `type` string comes from its payload (TypeOf, one table over the payload oneof),
// so the two can never disagree, and every emitter (agents, the run pipeline, the sandbox
// maker, the session manager, the gRPC edge's heartbeats) builds events here. Ids, seq and
// time are filled in by whoever appends the event (the run's sink, the event log).
//
//   events.Emit(events::RunQueued(3));                  // type "run.queued"
//   events.Emit(events::Notice(v1::Notice::SEVERITY_WARNING, "disk almost full"));
//
// Thread safe (pure functions).
#ifndef SANDGATE_COMMON_EVENTS_H_
#define SANDGATE_COMMON_EVENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sandgate/v1/sandgate.pb.h"

namespace sandgate::events {

// The dotted type string of a payload case, e.g. "command.finished"; "" for PAYLOAD_NOT_SET.
absl::string_view TypeOf(v1::Event::PayloadCase payload);

v1::Event Heartbeat();
v1::Event RunQueued(uint32_t position);
v1::Event RunStarted(std::string playbook, std::string provider, std::string agent,
                     std::string model);
v1::Event SessionCreated(v1::SessionCreated created);
v1::Event SessionClosed(std::string session_id, std::string reason);
v1::Event StepStarted(std::string name, std::string description);
v1::Event StepFinished(v1::StepFinished finished);
v1::Event CommandStarted(uint32_t command_id, std::string step,
                         const std::vector<std::string>& argv);
v1::Event CommandOutput(uint32_t command_id, v1::CommandOutput::Stream stream, std::string data);
v1::Event CommandFinished(v1::CommandFinished finished);
v1::Event FileTransferred(v1::FileTransferred::Direction direction, std::string path,
                          uint64_t size_bytes);
v1::Event ArtifactCollected(v1::Artifact artifact);
v1::Event Check(v1::CheckResult check);
v1::Event Notice(v1::Notice::Severity severity, std::string message);
v1::Event AgentMessage(std::string role, std::string text);
v1::Event TokenUsage(uint64_t input_tokens, uint64_t output_tokens, uint64_t total_tokens);
// `summary` is the playbook's (RunSummary), when the run got as far as its verdict.
v1::Event RunFinished(v1::RunStatus status, std::string reason,
                      std::vector<std::string> failed_checks,
                      const v1::RunSummary* summary = nullptr);
v1::Event NetworkDecision(v1::NetworkDecision decision);
v1::Event SessionExpiring(v1::SessionExpiring expiring);
v1::Event EventsDropped(v1::EventsDropped dropped);

}  // namespace sandgate::events

#endif  // SANDGATE_COMMON_EVENTS_H_
