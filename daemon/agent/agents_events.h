// AgentsEventMapper: the Agents API's (beta) session events as sandgate events, and what each
// means for the run (openai-api.md §7; the Agents API runs the agent loop and the sandbox).
//
// Mapping (every event is built by a named constructor of common/events.h):
//  - a `command_execution` item: command.started when it is added (argv /bin/sh -c <command>,
//    step "agent"), command.output from `…command_execution_output.delta` as it streams (the API
//    does not separate stdout from stderr: all of it is stdout), command.finished with its
//    exit_code and duration_ms when it is done; output the deltas did not carry is relayed from
//    the finished item first. A command still open when the stream ends finishes without an
//    exit code (cancelled when the run was).
//  - a `message` item (role assistant): agent_message with its output_text parts.
//  - the usage of a completed turn: token_usage (and the run's total as a notice, Finish).
//  - environment states (pending, ready, connected, disconnected, suspended, …): notices.
//    `reset` (the sandbox was replaced: files and processes lost) and `expired` FAIL the run
//    with that reason: sandgate never carries on silently in a fresh sandbox. `failed` fails it
//    with the environment's error.
//  - turn failed / cancelled upstream, session failed, requires_action (sandgate offers no
//    tools to answer), `error`: the run fails naming what the API said.
//  - anything else, including event types and enum values this version does not know: logged
//    (agents.event_ignored), never fatal — the Agents API is beta.
//
// Not thread safe: one per run, fed by the thread that reads the event stream.
//
//   AgentsEventMapper mapper(events);
//   for each event: if (std::optional<absl::Status> end = mapper.OnEvent(json)) return *end;
#ifndef SANDGATE_AGENT_AGENTS_EVENTS_H_
#define SANDGATE_AGENT_AGENTS_EVENTS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "agent/agent.h"
#include "agent/model_events.h"
#include "nlohmann/json.hpp"

namespace sandgate::agent {

class AgentsEventMapper {
 public:
  explicit AgentsEventMapper(EventSink& events) : events_(events) {}
  ~AgentsEventMapper() { AbortOpen(false); }

  // Maps one event (its SSE data, parsed). nullopt while the turn goes on; OK once the turn
  // completed; an error when the run must fail (FAILED_PRECONDITION naming what happened).
  std::optional<absl::Status> OnEvent(const nlohmann::json& event);
  // The stream ended (or broke for good): every command still open finishes without an exit
  // code, `cancelled` when the run was cancelled.
  void AbortOpen(bool cancelled);
  // The run's token total as an INFO notice (TokenTally::Finish).
  void Finish(const std::string& model) const { tally_.Finish(events_, model, "turns"); }

 private:
  struct Command {
    uint32_t id = 0;
    std::string relayed;  // output already sent as command.output
    bool finished = false;
  };

  void ItemAdded(const nlohmann::json& item);
  std::optional<absl::Status> ItemDone(const nlohmann::json& item);
  void OutputDelta(const nlohmann::json& event);
  std::optional<absl::Status> Environment(const std::string& state, const nlohmann::json& event);
  void Usage(const nlohmann::json& usage);
  Command& Started(const nlohmann::json& item);
  void Output(Command& c, std::string data);

  EventSink& events_;
  TokenTally tally_;
  std::map<std::string, Command> commands_;  // by item id
  std::set<std::string> messages_;           // message item ids already relayed
  std::map<std::string, std::string> text_;  // output_text.done by item id, for empty items
};

}  // namespace sandgate::agent

#endif  // SANDGATE_AGENT_AGENTS_EVENTS_H_
