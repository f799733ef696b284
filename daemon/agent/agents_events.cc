#include "agent/agents_events.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/errors.h"
#include "common/events.h"
#include "common/log.h"
#include "google/protobuf/util/time_util.h"
#include "sandbox/sandbox.h"

namespace sandgate::agent {
namespace {

using nlohmann::json;

const json& Field(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

std::string Str(const json& j, const char* key) {
  const json& v = Field(j, key);
  return v.is_string() ? v.get<std::string>() : "";
}

std::optional<int64_t> Int(const json& j, const char* key) {
  const json& v = Field(j, key);
  if (!v.is_number_integer()) return std::nullopt;
  return v.get<int64_t>();
}

uint64_t Count(const json& j, const char* key) {
  std::optional<int64_t> v = Int(j, key);
  return v && *v > 0 ? static_cast<uint64_t>(*v) : 0;
}

// "code: message", or whichever of the two the API gave; `fallback` when neither.
std::string Said(const json& error, absl::string_view fallback) {
  std::string code = Str(error, "code"), message = Str(error, "message");
  if (error.is_string()) message = error.get<std::string>();
  if (code.empty() && message.empty()) return std::string(fallback);
  if (code.empty() || message.empty()) return code.empty() ? message : code;
  return absl::StrCat(code, ": ", message);
}

// A command item's command line: a string, or an argv array joined with spaces.
std::string CommandLine(const json& item) {
  const json& c = Field(item, "command");
  if (c.is_string()) return c.get<std::string>();
  std::string line;
  if (c.is_array()) {
    for (const json& part : c) {
      if (part.is_string())
        absl::StrAppend(&line, line.empty() ? "" : " ", part.get<std::string>());
    }
  }
  return line;
}

// The text of a message item: its output_text (and refusal) parts, or a plain `text`.
std::string MessageText(const json& item) {
  std::string text = Str(item, "text");
  const json& content = Field(item, "content");
  if (content.is_array()) {
    for (const json& part : content) {
      absl::StrAppend(&text, Str(part, "text"), Str(part, "refusal"));
    }
  } else if (content.is_string()) {
    absl::StrAppend(&text, content.get<std::string>());
  }
  return text;
}

// Size of the longest common prefix.
size_t Common(absl::string_view a, absl::string_view b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

void Ignored(const std::string& type, absl::string_view why) {
  log::Info("agents.event_ignored", {{"type", type}, {"why", std::string(why)}});
}

}  // namespace

std::optional<absl::Status> AgentsEventMapper::OnEvent(const json& event) {
  const std::string type = Str(event, "type");
  absl::string_view rest = type;
  if (absl::ConsumePrefix(&rest, "agent.session.environment.")) {
    return Environment(std::string(rest), event);
  }
  if (absl::EndsWith(type, "command_execution_output.delta")) {
    OutputDelta(event);
    return std::nullopt;
  }
  if (type == "agent.session.turn.item.added") {
    ItemAdded(Field(event, "item"));
    return std::nullopt;
  }
  if (type == "agent.session.turn.item.done") return ItemDone(Field(event, "item"));
  if (absl::EndsWith(type, "output_text.done")) {
    const std::string id = Str(event, "item_id");
    if (!id.empty()) text_[id] = Str(event, "text");
    return std::nullopt;
  }
  if (type == "agent.session.turn.completed") {
    const json& turn = Field(event, "turn");
    Usage(Field(turn, "usage").is_object() ? Field(turn, "usage") : Field(event, "usage"));
    return absl::OkStatus();
  }
  if (type == "agent.session.turn.failed") {
    const json& turn = Field(event, "turn");
    const json& error =
        Field(turn, "error").is_null() ? Field(event, "error") : Field(turn, "error");
    Usage(Field(turn, "usage"));
    return errors::FailedPrecondition(
        absl::StrCat("the Agents API turn failed: ", Said(error, "no reason given")));
  }
  if (type == "agent.session.turn.cancelled") {
    return errors::FailedPrecondition("the Agents API cancelled the turn");
  }
  if (type == "agent.session.failed") {
    return errors::FailedPrecondition(absl::StrCat(
        "the Agents API session failed: ", Said(Field(Field(event, "session"), "error"),
                                                Said(Field(event, "error"), "no reason given"))));
  }
  if (type == "agent.session.requires_action") {
    std::string what;
    const json& actions = Field(Field(event, "session"), "required_actions");
    if (actions.is_array()) {
      for (const json& a : actions)
        absl::StrAppend(&what, what.empty() ? "" : ", ", Str(a, "type"));
    }
    return errors::FailedPrecondition(
        absl::StrCat("the Agents API session asks for an action sandgate does not take (",
                     what.empty() ? "unnamed" : what, "): no tools are offered to the agent"));
  }
  if (type == "error") {
    return errors::FailedPrecondition(absl::StrCat(
        "the Agents API reported an error: ",
        Said(Field(event, "error").is_null() ? event : Field(event, "error"), "no message")));
  }
  // Lifecycle events that say nothing the run needs (created, in_progress, idle, turn.created,
  // content parts, reasoning summaries, subagents), and types this version does not know.
  if (!absl::StartsWith(type, "agent.session.")) Ignored(type, "unknown event type");
  return std::nullopt;
}

AgentsEventMapper::Command& AgentsEventMapper::Started(const json& item) {
  const std::string id = Str(item, "id");
  auto [it, fresh] = commands_.try_emplace(id);
  if (fresh) {
    it->second.id = events_.NextCommandId();
    events_.Emit(
        events::CommandStarted(it->second.id, "agent", sandbox::ShellCommand(CommandLine(item))));
  }
  return it->second;
}

void AgentsEventMapper::Output(Command& c, std::string data) {
  if (data.empty() || c.finished) return;
  c.relayed += data;
  events_.Emit(events::CommandOutput(c.id, v1::CommandOutput::STREAM_STDOUT, std::move(data)));
}

void AgentsEventMapper::ItemAdded(const json& item) {
  if (Str(item, "type") == "command_execution") Started(item);
}

void AgentsEventMapper::OutputDelta(const json& event) {
  auto it = commands_.find(Str(event, "item_id"));
  if (it == commands_.end()) {
    Ignored(Str(event, "type"), "output of a command that was never added");
    return;
  }
  const json& delta = Field(event, "delta");
  if (delta.is_string()) {
    Output(it->second, delta.get<std::string>());
  } else {  // tolerated: {stdout, stderr}, as the Responses API streams it
    Output(it->second, Str(delta, "stdout") + Str(delta, "stderr"));
  }
}

std::optional<absl::Status> AgentsEventMapper::ItemDone(const json& item) {
  const std::string type = Str(item, "type");
  if (type == "message" || type == "agent_message") {
    const std::string id = Str(item, "id");
    if (!id.empty() && !messages_.insert(id).second) return std::nullopt;
    if (Str(item, "role") == "user") return std::nullopt;
    std::string text = MessageText(item);
    if (text.empty()) text = text_[id];
    EmitAssistantMessage(events_, std::move(text));
    return std::nullopt;
  }
  if (type != "command_execution") return std::nullopt;
  Command& c = Started(item);
  if (c.finished) return std::nullopt;
  // What the deltas did not carry (all of it when none came) is relayed before the end.
  const std::string output = Str(item, "output");
  const size_t same = Common(c.relayed, output);
  // The deltas said more than the final output kept: the API cut it.
  const bool cut = same < c.relayed.size();
  if (!cut) Output(c, output.substr(same));
  v1::CommandFinished f;
  f.set_command_id(c.id);
  f.set_exit_code(static_cast<int32_t>(Int(item, "exit_code").value_or(-1)));
  f.set_output_truncated(cut);
  const std::string status = Str(item, "status");
  f.set_cancelled(status == "cancelled" || status == "declined");
  f.set_timed_out(status == "timed_out" || status == "timeout");
  if (std::optional<int64_t> ms = Int(item, "duration_ms"); ms && *ms >= 0) {
    *f.mutable_duration() = google::protobuf::util::TimeUtil::MillisecondsToDuration(*ms);
  }
  c.finished = true;
  events_.Emit(events::CommandFinished(std::move(f)));
  return std::nullopt;
}

void AgentsEventMapper::AbortOpen(bool cancelled) {
  for (auto& [id, c] : commands_) {
    if (c.finished) continue;
    c.finished = true;
    v1::CommandFinished f;
    f.set_command_id(c.id);
    f.set_exit_code(-1);
    f.set_cancelled(cancelled);
    events_.Emit(events::CommandFinished(std::move(f)));
  }
}

void AgentsEventMapper::Usage(const json& usage) {
  if (!usage.is_object()) return;
  const uint64_t in = Count(usage, "input_tokens"), out = Count(usage, "output_tokens");
  const uint64_t total = usage.contains("total_tokens") ? Count(usage, "total_tokens") : in + out;
  tally_.Add(events_, in, out, total);
}

std::optional<absl::Status> AgentsEventMapper::Environment(const std::string& state,
                                                           const json& event) {
  const json& env = Field(event, "environment");
  // The state events carry an environment object; a reset names it at the top level.
  std::string id = Str(env, "id");
  if (id.empty()) id = Str(event, "environment_id");
  if (id.empty()) id = "(unnamed)";
  if (state == "reset") {
    AbortOpen(false);
    return errors::FailedPrecondition(absl::StrCat(
        "the Agents API environment ", id,
        " was reset mid-run (its files and processes are lost); sandgate does not carry on "
        "in a fresh sandbox"));
  }
  if (state == "expired") {
    AbortOpen(false);
    return errors::FailedPrecondition(
        absl::StrCat("the Agents API environment ", id, " expired mid-run"));
  }
  if (state == "failed") {
    AbortOpen(false);
    return errors::FailedPrecondition(absl::StrCat("the Agents API environment ", id, " failed: ",
                                                   Said(Field(env, "error"), "no reason given")));
  }
  // pending, ready, connected: the way to a working sandbox; disconnected and suspended (it
  // may resume from its checkpoint) and unknown states: worth a warning, not an end.
  const bool usual = state == "pending" || state == "ready" || state == "connected";
  EmitNotice(events_, usual ? v1::Notice::SEVERITY_INFO : v1::Notice::SEVERITY_WARNING,
             absl::StrCat("Agents API environment ", id, ": ", state));
  return std::nullopt;
}

}  // namespace sandgate::agent
