// The Agents API's JSON shapes (docs/openai-api.md §7): request bodies, and the objects and
// events read back. Part of AgentsClient (agents_client.h), split from agents_client.cc
// (the calls and the event stream) only to keep each file short; nothing outside these two
// files knows the shapes.
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "upstream/agents_client.h"

namespace sandgate::upstream {

using nlohmann::json;

namespace {

constexpr int kMaxMetadataPairs = 16;
constexpr size_t kMaxRestrictedDomains = 100;

// An upstream value this client does not know: kept (status_text, raw) and logged, never an
// error, because the beta API may add values at any time.
void LogUnknown(absl::string_view field, absl::string_view value) {
  log::Warning("agents.unknown_value",
               {{"field", std::string(field)}, {"value", std::string(value)}});
}

template <typename Enum, size_t N>
Enum MapStatus(absl::string_view field, const std::string& text,
               const std::pair<const char*, Enum> (&table)[N], Enum unknown) {
  for (const auto& [name, value] : table) {
    if (text == name) return value;
  }
  if (!text.empty()) LogUnknown(field, text);
  return unknown;
}

AgentEnvironmentStatus EnvironmentStatus(const std::string& text) {
  static constexpr std::pair<const char*, AgentEnvironmentStatus> kTable[] = {
      {"pending", AgentEnvironmentStatus::kPending},
      {"ready", AgentEnvironmentStatus::kReady},
      {"connected", AgentEnvironmentStatus::kConnected},
      {"disconnected", AgentEnvironmentStatus::kDisconnected},
      {"suspended", AgentEnvironmentStatus::kSuspended},
      {"expired", AgentEnvironmentStatus::kExpired},
      {"failed", AgentEnvironmentStatus::kFailed},
  };
  return MapStatus("environment.status", text, kTable, AgentEnvironmentStatus::kUnknown);
}

AgentSessionStatus SessionStatus(const std::string& text) {
  static constexpr std::pair<const char*, AgentSessionStatus> kTable[] = {
      {"idle", AgentSessionStatus::kIdle},
      {"in_progress", AgentSessionStatus::kInProgress},
      {"requires_action", AgentSessionStatus::kRequiresAction},
      {"failed", AgentSessionStatus::kFailed},
  };
  return MapStatus("session.status", text, kTable, AgentSessionStatus::kUnknown);
}

AgentTurnStatus TurnStatus(const std::string& text) {
  static constexpr std::pair<const char*, AgentTurnStatus> kTable[] = {
      {"queued", AgentTurnStatus::kQueued},   {"in_progress", AgentTurnStatus::kInProgress},
      {"waiting", AgentTurnStatus::kWaiting}, {"completed", AgentTurnStatus::kCompleted},
      {"failed", AgentTurnStatus::kFailed},   {"cancelled", AgentTurnStatus::kCancelled},
  };
  return MapStatus("turn.status", text, kTable, AgentTurnStatus::kUnknown);
}

const json& Member(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

json ErrorField(const json& j) {
  const json& e = Member(j, "error");
  return e.is_null() ? json() : e;
}

// The message of an error value: an object's "message", or the value itself.
std::string ErrorMessage(const json& error) {
  if (error.is_null()) return "";
  if (error.is_string()) return error.get<std::string>();
  std::string message = StringField(error, "message");
  return message.empty() ? Dump(error) : message;
}

std::optional<AgentUsage> ParseUsage(const json& j) {
  if (!j.is_object()) return std::nullopt;
  AgentUsage u;
  u.input_tokens = IntField(j, "input_tokens");
  u.output_tokens = IntField(j, "output_tokens");
  u.total_tokens = IntField(j, "total_tokens");
  if (u.total_tokens == 0) u.total_tokens = u.input_tokens + u.output_tokens;
  u.cached_tokens = IntField(Member(j, "input_tokens_details"), "cached_tokens");
  u.reasoning_tokens = IntField(Member(j, "output_tokens_details"), "reasoning_tokens");
  u.raw = j;
  return u;
}

// Lenient: an environment without an id (type "none") still parses here.
AgentEnvironment EnvironmentFrom(const json& j) {
  AgentEnvironment e;
  e.id = StringField(j, "id");
  e.type = StringField(j, "type");
  e.status_text = StringField(j, "status");
  e.status = EnvironmentStatus(e.status_text);
  e.container_size = StringField(j, "container_size");
  e.error = ErrorField(j);
  e.raw = j;
  return e;
}

AgentSession SessionFrom(const json& j) {
  AgentSession s;
  s.id = StringField(j, "id");
  s.status_text = StringField(j, "status");
  s.status = SessionStatus(s.status_text);
  s.created_at = IntField(j, "created_at");
  s.last_active_at = IntField(j, "last_active_at");
  s.environment = EnvironmentFrom(Member(j, "environment"));
  s.usage = ParseUsage(Member(j, "usage"));
  s.error = ErrorField(j);
  const json& actions = Member(j, "required_actions");
  s.required_actions = actions.is_array() ? actions : json::array();
  const json& metadata = Member(j, "metadata");
  if (metadata.is_object()) {
    for (const auto& [key, value] : metadata.items()) {
      if (value.is_string()) s.metadata[key] = value.get<std::string>();
    }
  }
  s.raw = j;
  return s;
}

AgentTurn TurnFrom(const json& j) {
  AgentTurn t;
  t.id = StringField(j, "id");
  t.session_id = StringField(j, "session_id");
  t.status_text = StringField(j, "status");
  t.status = TurnStatus(t.status_text);
  t.created_at = IntField(j, "created_at");
  t.started_at = IntField(j, "started_at");
  t.completed_at = IntField(j, "completed_at");
  t.usage = ParseUsage(Member(j, "usage"));
  t.error = ErrorField(j);
  t.raw = j;
  return t;
}

AgentItem ItemFrom(const json& j) {
  AgentItem item;
  item.id = StringField(j, "id");
  item.type = StringField(j, "type");
  item.turn_id = StringField(j, "turn_id");
  item.status = StringField(j, "status");
  item.raw = j;
  if (item.type == "command_execution") {
    AgentCommandExecution c;
    c.id = item.id;
    c.turn_id = item.turn_id;
    c.command = StringField(j, "command");
    c.cwd = StringField(j, "cwd");
    c.status = item.status;
    if (const json& code = Member(j, "exit_code"); code.is_number()) {
      c.exit_code = static_cast<int>(IntField(j, "exit_code"));
    }
    c.duration_ms = IntField(j, "duration_ms");
    c.output = StringField(j, "output");
    item.command = std::move(c);
  } else if (item.type == "message") {
    item.role = StringField(j, "role");
    item.phase = StringField(j, "phase");
    const json& content = Member(j, "content");
    if (content.is_string()) item.text = content.get<std::string>();
    if (content.is_array()) {
      for (const json& part : content) {
        const std::string type = StringField(part, "type");
        if (type == "output_text" || type == "text") item.text += StringField(part, "text");
      }
    }
  }
  return item;
}

bool Suffix(absl::string_view type, absl::string_view prefix, absl::string_view* rest) {
  if (!absl::StartsWith(type, prefix)) return false;
  *rest = type.substr(prefix.size());
  return true;
}

bool OneOf(absl::string_view s, std::initializer_list<absl::string_view> options) {
  for (absl::string_view o : options) {
    if (s == o) return true;
  }
  return false;
}

// Fills kind and the typed views of `e` from e.raw; returns whether the type belongs to a
// family this client knows (modelled or not).
bool Classify(AgentEvent& e) {
  const json& j = e.raw;
  absl::string_view rest;
  const absl::string_view type = e.type;
  if (type == "error") {
    e.kind = AgentEventKind::kError;
    e.error_message =
        ErrorMessage(j.contains("error") ? ErrorField(j) : json(StringField(j, "message")));
    return true;
  }
  if (absl::EndsWith(type, "command_execution_output.delta")) {
    e.kind = AgentEventKind::kCommandOutputDelta;
  } else if (absl::EndsWith(type, ".output_text.delta")) {
    e.kind = AgentEventKind::kOutputTextDelta;
  } else if (absl::EndsWith(type, ".output_text.done")) {
    e.kind = AgentEventKind::kOutputTextDone;
  }
  if (e.kind != AgentEventKind::kOther) {
    e.item_id = StringField(j, "item_id");
    e.delta = e.kind == AgentEventKind::kOutputTextDone ? StringField(j, "text")
                                                        : StringField(j, "delta");
    return true;
  }
  if (Suffix(type, "agent.session.environment.", &rest)) {
    e.kind =
        rest == "reset" ? AgentEventKind::kEnvironmentReset : AgentEventKind::kEnvironmentStatus;
    AgentEnvironment env = EnvironmentFrom(Member(j, "environment"));
    // A reset names its environment at the top level (`environment_id`), not in an object.
    if (env.id.empty()) env.id = StringField(j, "environment_id");
    // An event that names its state only in its type still says what the state is.
    if (env.status_text.empty() && e.kind == AgentEventKind::kEnvironmentStatus) {
      env.status_text = std::string(rest);
      env.status = EnvironmentStatus(env.status_text);
    }
    e.error_message = ErrorMessage(env.error);
    e.environment = std::move(env);
    return true;
  }
  if (Suffix(type, "agent.session.turn.item.", &rest)) {
    if (rest == "added" || rest == "done") {
      e.kind = rest == "added" ? AgentEventKind::kItemAdded : AgentEventKind::kItemDone;
      AgentItem item = ItemFrom(Member(j, "item"));
      if (item.turn_id.empty()) item.turn_id = e.turn_id;
      if (item.command.has_value() && item.command->turn_id.empty()) {
        item.command->turn_id = item.turn_id;
      }
      e.item_id = item.id;
      e.item = std::move(item);
    }
    return true;  // content_part.*, reasoning_summary_*: known, not modelled
  }
  if (Suffix(type, "agent.session.turn.", &rest)) {
    if (!OneOf(rest, {"created", "in_progress", "completed", "failed", "cancelled"})) {
      return absl::StrContains(rest, "reasoning_summary") ||
             absl::StrContains(rest, "content_part");
    }
    e.kind = AgentEventKind::kTurnStatus;
    AgentTurn turn = TurnFrom(Member(j, "turn"));
    if (turn.id.empty()) turn.id = e.turn_id;
    if (turn.session_id.empty()) turn.session_id = e.session_id;
    if (turn.status_text.empty()) {
      turn.status_text = std::string(rest);
      turn.status = TurnStatus(turn.status_text);
    }
    e.error_message = ErrorMessage(turn.error);
    e.turn = std::move(turn);
    return true;
  }
  if (Suffix(type, "agent.session.", &rest)) {
    if (!OneOf(rest, {"created", "in_progress", "idle", "requires_action", "failed"})) {
      return absl::StartsWith(rest, "subagent.") || rest == "budget_reached";
    }
    e.kind = AgentEventKind::kSessionStatus;
    AgentSession session = SessionFrom(Member(j, "session"));
    if (session.id.empty()) session.id = e.session_id;
    if (session.status_text.empty() && rest != "created") {
      session.status_text = std::string(rest);
      session.status = SessionStatus(session.status_text);
    }
    e.error_message = ErrorMessage(session.error);
    e.session = std::move(session);
    return true;
  }
  return false;
}

AgentEvent ParseEvent(const json& j, bool* known) {
  AgentEvent e;
  e.raw = j;
  e.type = StringField(j, "type");
  e.event_id = StringField(j, "event_id");
  e.session_id = StringField(j, "session_id");
  e.turn_id = StringField(j, "turn_id");
  *known = Classify(e);
  if (e.session_id.empty() && e.session.has_value()) e.session_id = e.session->id;
  if (e.turn_id.empty() && e.turn.has_value()) e.turn_id = e.turn->id;
  if (e.turn_id.empty() && e.item.has_value()) e.turn_id = e.item->turn_id;
  e.usage = ParseUsage(Member(j, "usage"));
  if (!e.usage.has_value() && e.turn.has_value()) e.usage = e.turn->usage;
  return e;
}

std::string RequireIdMessage(absl::string_view what) {
  return absl::StrCat("openai agents: the ", what, " object has no id");
}

json EnvironmentJson(const AgentEnvironmentSpec& env, absl::Status* error) {
  auto fail = [&](absl::string_view field, absl::string_view problem) {
    *error = errors::InvalidArgument(absl::StrCat("environment.", field, ": ", problem));
    return json();
  };
  if (env.type.empty()) return fail("type", "required (openai_hosted, self_hosted or none)");
  json j = {{"type", env.type}};
  if (!env.container_size.empty()) j["container_size"] = env.container_size;
  if (env.network.has_value()) {
    const AgentNetwork& n = *env.network;
    if (n.access.empty()) return fail("network.access", "required (enabled, disabled, restricted)");
    if (n.access == "restricted" &&
        (n.allowed_domains.empty() || n.allowed_domains.size() > kMaxRestrictedDomains)) {
      return fail("network.allowed_domains", "restricted takes 1 to 100 exact host names");
    }
    if (n.access != "restricted" && !n.allowed_domains.empty()) {
      return fail("network.allowed_domains",
                  absl::StrCat("only with access restricted, not ", n.access));
    }
    if (n.access != "restricted" && !n.blocked_domains.empty()) {
      return fail("network.blocked_domains", "only with access restricted");
    }
    json network = {{"access", n.access}};
    if (!n.allowed_domains.empty()) network["allowed_domains"] = n.allowed_domains;
    if (!n.blocked_domains.empty()) network["blocked_domains"] = n.blocked_domains;
    j["network"] = std::move(network);
  }
  if (!env.files.empty()) {
    json files = json::array();
    for (size_t i = 0; i < env.files.size(); ++i) {
      const AgentFile& f = env.files[i];
      const std::string field = absl::StrCat("files[", i, "]");
      if (!absl::StartsWith(f.path, "/")) return fail(field + ".path", "must be an absolute path");
      if (f.kind == AgentFile::Kind::kFileId) {
        if (f.file_id.empty()) return fail(field + ".file_id", "required");
        files.push_back({{"type", "file_id"}, {"file_id", f.file_id}, {"path", f.path}});
      } else {
        files.push_back(
            {{"type", "inline"}, {"path", f.path}, {"data", absl::Base64Escape(f.data)}});
      }
    }
    j["files"] = std::move(files);
  }
  if (!env.setup_commands.empty()) {
    json commands = json::array();
    for (size_t i = 0; i < env.setup_commands.size(); ++i) {
      const AgentSetupCommand& c = env.setup_commands[i];
      if (c.command.empty()) return fail(absl::StrCat("setup_commands[", i, "].command"), "empty");
      json command = {{"command", c.command}};
      if (!c.cwd.empty()) command["cwd"] = c.cwd;
      commands.push_back(std::move(command));
    }
    j["setup_commands"] = std::move(commands);
  }
  if (!env.env.empty()) j["env"] = env.env;
  json packages = json::object();
  if (!env.python_packages.empty()) packages["python"] = env.python_packages;
  if (!env.system_packages.empty()) packages["system"] = env.system_packages;
  if (!env.npm_packages.empty()) packages["npm"] = env.npm_packages;
  if (!packages.empty()) j["packages"] = std::move(packages);
  if (!env.environment_template_id.empty()) {
    j["environment_template_id"] = env.environment_template_id;
  }
  if (!env.workspace_directory.empty()) {
    if (!absl::StartsWith(env.workspace_directory, "/")) {
      return fail("workspace_directory", "must be an absolute path");
    }
    j["workspace_directory"] = env.workspace_directory;
  }
  if (env.type == "self_hosted" && env.workspace_directory.empty()) {
    return fail("workspace_directory", "required for a self_hosted environment");
  }
  if (!env.extra.is_null() && !env.extra.is_object()) return fail("extra", "must be an object");
  if (env.extra.is_object()) j.update(env.extra);
  return j;
}

}  // namespace

bool AgentTurn::IsFinished() const {
  return status == AgentTurnStatus::kCompleted || status == AgentTurnStatus::kFailed ||
         status == AgentTurnStatus::kCancelled;
}

absl::StatusOr<json> AgentSessionRequestJson(const AgentSessionRequest& request) {
  absl::Status error;
  json environment = EnvironmentJson(request.environment, &error);
  SANDGATE_RETURN_IF_ERROR(error);
  json body = {{"environment", std::move(environment)}};
  if (request.agent_id.empty() && request.agent.model.empty()) {
    return errors::InvalidArgument("agent.model: required unless agent_id is set");
  }
  if (!request.agent_id.empty()) body["agent_id"] = request.agent_id;
  json agent = json::object();
  if (!request.agent.model.empty()) agent["model"] = request.agent.model;
  if (!request.agent.instructions.empty()) agent["instructions"] = request.agent.instructions;
  if (!request.agent.extra.is_null() && !request.agent.extra.is_object()) {
    return errors::InvalidArgument("agent.extra: must be an object");
  }
  if (request.agent.extra.is_object()) agent.update(request.agent.extra);
  if (!agent.empty()) body["agent"] = std::move(agent);
  if (!request.input.empty()) body["input"] = request.input;
  if (request.metadata.size() > kMaxMetadataPairs) {
    return errors::InvalidArgument(absl::StrCat("metadata: at most ", kMaxMetadataPairs,
                                                " pairs, not ", request.metadata.size()));
  }
  if (!request.metadata.empty()) body["metadata"] = request.metadata;
  return body;
}

absl::StatusOr<AgentSession> ParseAgentSession(const json& j) {
  AgentSession s = SessionFrom(j);
  if (s.id.empty()) return errors::Internal(RequireIdMessage("session"));
  return s;
}

absl::StatusOr<AgentTurn> ParseAgentTurn(const json& j) {
  AgentTurn t = TurnFrom(j);
  if (t.id.empty()) return errors::Internal(RequireIdMessage("turn"));
  return t;
}

absl::StatusOr<AgentArtifact> ParseAgentArtifact(const json& j) {
  AgentArtifact a;
  a.id = StringField(j, "id");
  if (a.id.empty()) return errors::Internal(RequireIdMessage("artifact"));
  a.path = StringField(j, "path");
  a.size_bytes = IntField(j, "size_bytes");
  a.created_at = IntField(j, "created_at");
  a.environment_id = StringField(j, "environment_id");
  a.session_id = StringField(j, "session_id");
  a.turn_id = StringField(j, "turn_id");
  a.raw = j;
  return a;
}

absl::StatusOr<AgentItem> ParseAgentItem(const json& j) {
  AgentItem item = ItemFrom(j);
  if (item.id.empty()) return errors::Internal(RequireIdMessage("item"));
  return item;
}

absl::StatusOr<AgentEnvironment> ParseAgentEnvironment(const json& j) {
  AgentEnvironment e = EnvironmentFrom(j);
  if (e.id.empty()) return errors::Internal(RequireIdMessage("environment"));
  return e;
}

AgentEvent ParseAgentEvent(const json& j, bool* known_type) {
  bool known = false;
  AgentEvent e = ParseEvent(j, &known);
  if (known_type != nullptr) *known_type = known;
  return e;
}

}  // namespace sandgate::upstream
