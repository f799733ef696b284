#include "upstream/agents_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errors.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace sandgate::upstream {

using nlohmann::json;

namespace {

constexpr absl::string_view kSessions = "/agents/sessions";

// `path` with the non-empty `terms` ("name=value", values escaped by the caller) as its query.
std::string WithQuery(std::string path, const std::vector<std::string>& terms) {
  for (size_t i = 0; i < terms.size(); ++i) absl::StrAppend(&path, i == 0 ? "?" : "&", terms[i]);
  return path;
}

// The cursor terms every list takes.
void AddCursorTerms(const std::string& after, int limit, const std::string& order,
                    std::vector<std::string>* terms) {
  if (!after.empty()) terms->push_back(absl::StrCat("after=", Escape(after)));
  if (limit > 0) terms->push_back(absl::StrCat("limit=", limit));
  if (!order.empty()) terms->push_back(absl::StrCat("order=", Escape(order)));
}

// A list page read by `parse` (json → StatusOr<T>, with an `id`); its first failure fails it.
template <typename T, typename Parse>
absl::StatusOr<AgentListPage<T>> ReadPage(const json& j, const Parse& parse) {
  AgentListPage<T> page;
  for (const json& item : ListData(j)) {
    SANDGATE_ASSIGN_OR_RETURN(T t, parse(item));
    page.data.push_back(std::move(t));
  }
  page.has_more = j.is_object() && j.value("has_more", false);
  page.last_id = StringField(j, "last_id");
  if (page.last_id.empty() && !page.data.empty()) page.last_id = page.data.back().id;
  return page;
}

// Whether `event` says something the stream has not said yet: an item added or done and a
// turn's end count once, whichever way (stream, replay or read-back) they came first; output
// of a finished or gapped command is dropped (its item.done carries it). Records what it says.
bool FirstTime(const AgentEvent& event, AgentEventStreamState* state) {
  switch (event.kind) {
    case AgentEventKind::kItemAdded:
      return event.item_id.empty() || state->items_added.insert(event.item_id).second;
    case AgentEventKind::kItemDone:
      if (event.item_id.empty()) return true;
      state->items_added.insert(event.item_id);
      state->items_gapped.erase(event.item_id);
      return state->items_done.insert(event.item_id).second;
    case AgentEventKind::kCommandOutputDelta:
      return !state->items_done.contains(event.item_id) &&
             !state->items_gapped.contains(event.item_id);
    case AgentEventKind::kTurnStatus:
      return !event.turn->IsFinished() || event.turn->id.empty() ||
             state->turns_finished.insert(event.turn->id).second;
    default:
      return true;
  }
}

// An item still being produced (its item.done is to come); other statuses, known or not, are
// final.
bool ItemIsOpen(const std::string& status) {
  return status == "in_progress" || status == "queued" || status == "waiting";
}

}  // namespace

AgentsClient::AgentsClient(HttpClient* http, const Credentials* credentials, std::string base_url,
                           AgentsOptions options)
    : options_(std::move(options)), transport_(http, credentials, std::move(base_url), [this] {
        OpenAiOptions o = options_.http;
        o.extra_headers.emplace_back(std::string(kAgentsBetaHeader), std::string(kAgentsBetaValue));
        return o;
      }()) {}

// --- Sessions ---

absl::StatusOr<AgentSession> AgentsClient::CreateSession(const AgentSessionRequest& request,
                                                         const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(json body, AgentSessionRequestJson(request));
  SANDGATE_ASSIGN_OR_RETURN(json j,
                            transport_.JsonCall("POST", std::string(kSessions), &body, cancel));
  return ParseAgentSession(j);
}

absl::StatusOr<AgentSession> AgentsClient::CreateSessionStream(const AgentSessionRequest& request,
                                                               AgentEventStreamState* state,
                                                               const AgentEventCallback& on_event,
                                                               const CancelToken* cancel) {
  if (request.input.empty() && request.environment.type != "self_hosted") {
    return errors::InvalidArgument(absl::StrCat("input: required for a streaming create on a ",
                                                request.environment.type, " environment"));
  }
  SANDGATE_ASSIGN_OR_RETURN(json body, AgentSessionRequestJson(request));
  std::optional<AgentSession> latest;
  SANDGATE_RETURN_IF_ERROR(Stream(&body, state, on_event, &latest, cancel));
  if (latest.has_value()) return *std::move(latest);
  if (state->session_id.empty()) {
    return errors::Internal("openai POST /agents/sessions (stream): no event named the session");
  }
  return GetSession(state->session_id, cancel);
}

absl::StatusOr<AgentSession> AgentsClient::GetSession(absl::string_view session_id,
                                                      const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(
      json j, transport_.JsonCall("GET", absl::StrCat(kSessions, "/", Escape(session_id)), nullptr,
                                  cancel));
  return ParseAgentSession(j);
}

absl::StatusOr<AgentSessionPage> AgentsClient::ListSessions(const AgentSessionListParams& params,
                                                            const CancelToken* cancel) {
  std::vector<std::string> terms;
  AddCursorTerms(params.after, params.limit, params.order, &terms);
  SANDGATE_ASSIGN_OR_RETURN(
      json j,
      transport_.JsonCall("GET", WithQuery(std::string(kSessions), terms), nullptr, cancel));
  return ReadPage<AgentSession>(j, ParseAgentSession);
}

absl::StatusOr<std::vector<AgentSession>> AgentsClient::ListAllSessions(const CancelToken* cancel) {
  return transport_.ListAllAs<AgentSession>(std::string(kSessions), ParseAgentSession, cancel);
}

absl::Status AgentsClient::DeleteSession(absl::string_view session_id, const CancelToken* cancel) {
  return transport_
      .JsonCall("DELETE", absl::StrCat(kSessions, "/", Escape(session_id)), nullptr, cancel)
      .status();
}

// --- Input events ---

absl::Status AgentsClient::SendMessage(absl::string_view session_id, absl::string_view text,
                                       absl::string_view idempotency_key,
                                       const CancelToken* cancel) {
  json message = {
      {"role", "user"},
      {"content", json::array({{{"type", "input_text"}, {"text", std::string(text)}}})}};
  json events = json::array(
      {{{"type", "agent.session.input.message"}, {"input", json::array({std::move(message)})}}});
  return PostEvents(session_id, events, idempotency_key, cancel);
}

absl::Status AgentsClient::SendCancel(absl::string_view session_id,
                                      absl::string_view idempotency_key,
                                      const CancelToken* cancel) {
  return PostEvents(session_id, json::array({{{"type", "agent.session.input.cancel"}}}),
                    idempotency_key, cancel);
}

absl::Status AgentsClient::PostEvents(absl::string_view session_id, const json& events,
                                      absl::string_view idempotency_key,
                                      const CancelToken* cancel) {
  if (!events.is_array() || events.empty()) {
    return errors::InvalidArgument("events: a non-empty array of input events is required");
  }
  const json body = {{"events", events}};
  // A key per logical send, so the retry layer repeating this request cannot start two turns.
  std::string key = idempotency_key.empty() ? absl::StrCat("sandgate-", RandomHex(16))
                                            : std::string(idempotency_key);
  return transport_
      .JsonCall("POST", absl::StrCat(kSessions, "/", Escape(session_id), "/events"), &body, cancel,
                {{"Idempotency-Key", std::move(key)}})
      .status();
}

// --- The event stream ---

absl::Status AgentsClient::StreamEvents(absl::string_view session_id, AgentEventStreamState* state,
                                        const AgentEventCallback& on_event,
                                        const CancelToken* cancel) {
  if (state->session_id.empty()) state->session_id = std::string(session_id);
  std::optional<AgentSession> latest;
  return Stream(nullptr, state, on_event, &latest, cancel);
}

absl::Status AgentsClient::Stream(const json* create_request, AgentEventStreamState* state,
                                  const AgentEventCallback& on_event,
                                  std::optional<AgentSession>* latest, const CancelToken* cancel) {
  bool stopped = false;
  bool callback_failed = false;
  state->server_ended = false;
  bool warned_unknown = false;
  // Every event, streamed or read back, passes here once.
  const auto deliver = [&](const AgentEvent& event) -> absl::Status {
    if (!event.event_id.empty() && !state->seen_event_ids.insert(event.event_id).second) {
      return absl::OkStatus();  // replayed after a reconnect: delivered already
    }
    if (!FirstTime(event, state)) return absl::OkStatus();
    if (event.session.has_value() && !event.session->id.empty()) {
      if (state->session_id.empty()) state->session_id = event.session->id;
      *latest = *event.session;
    }
    if (state->session_id.empty() && !event.session_id.empty()) {
      state->session_id = event.session_id;
    }
    ++state->delivered;
    absl::Status s = on_event(event, &stopped);
    if (!s.ok()) callback_failed = true;
    return s;
  };
  auto handle = [&](const SseEvent& sse, const json& data, bool* done) -> absl::Status {
    if (!sse.id.empty()) state->last_sse_id = sse.id;
    if (!data.is_object()) return absl::OkStatus();
    bool known = false;
    AgentEvent event = ParseAgentEvent(data, &known);
    if (event.type.empty()) event.type = sse.event;
    if (!known && !warned_unknown && !state->seen_event_ids.contains(event.event_id)) {
      warned_unknown = true;
      log::Warning("agents.unknown_value", {{"field", "event.type"}, {"value", event.type}});
    }
    SANDGATE_RETURN_IF_ERROR(deliver(event));
    *done = stopped;
    return absl::OkStatus();
  };
  // After a break: once the new stream listens, what happened in the gap.
  const OpenAiTransport::StreamOpened read_back = [&](bool* done) -> absl::Status {
    absl::Status s = ReadBack(state, deliver, &stopped, cancel);
    *done = stopped;
    if (s.ok() || callback_failed) return s;
    return absl::Status(s.code(),
                        absl::StrCat("reading back what session ", state->session_id,
                                     " did while its event stream was down: ", s.message()));
  };

  const json* request = create_request;
  int without_progress = 0;
  bool after_break = false;
  for (;;) {
    const int64_t before = state->delivered;
    std::string path;
    std::vector<std::pair<std::string, std::string>> headers;
    if (request != nullptr) {
      path = std::string(kSessions);
    } else {
      path = absl::StrCat(kSessions, "/", Escape(state->session_id), "/events");
      if (!state->last_sse_id.empty()) headers.emplace_back("Last-Event-ID", state->last_sse_id);
    }
    absl::Status s =
        transport_.StreamCall(path, request, handle, cancel, headers, options_.stream_timeout,
                              after_break ? read_back : OpenAiTransport::StreamOpened());
    if (stopped || callback_failed) return s;
    if (s.ok()) {
      state->server_ended = true;
      return s;
    }
    if (!IsBrokenStream(s)) return s;
    const std::string why(s.message());
    if (state->session_id.empty()) {
      // Sending the create again could make a second session: only the caller may decide.
      return BrokenStream(errors::Unavailable(
          absl::StrCat(why, " before the session was named; a session may exist")));
    }
    without_progress = state->delivered > before ? 0 : without_progress + 1;
    if (without_progress > options_.max_stream_reconnects) {
      return BrokenStream(errors::Unavailable(absl::StrCat(
          why, " (", without_progress, " times in a row without a new event; giving up)")));
    }
    // Whatever was running may have streamed output into the gap.
    for (const std::string& id : state->items_added) {
      if (!state->items_done.contains(id)) state->items_gapped.insert(id);
    }
    log::Info("agents.stream_reconnect",
              {{"session", state->session_id}, {"delivered", state->delivered}, {"reason", why}});
    ++state->reconnects;
    request = nullptr;
    after_break = true;
  }
}

absl::Status AgentsClient::ReadBack(AgentEventStreamState* state,
                                    const std::function<absl::Status(const AgentEvent&)>& deliver,
                                    const bool* stopped, const CancelToken* cancel) {
  ++state->read_backs;
  const std::string& session_id = state->session_id;
  // Turns first: a turn over by now has all its items in the list read after it.
  SANDGATE_ASSIGN_OR_RETURN(std::vector<AgentTurn> turns, ListTurns(session_id, cancel));
  SANDGATE_ASSIGN_OR_RETURN(std::vector<AgentItem> items, ListItems(session_id, cancel));
  const int64_t before = state->delivered;
  const auto made = [&](const std::string& type, const std::string& turn_id, json fields) {
    fields["type"] = type;
    fields["session_id"] = session_id;
    fields["turn_id"] = turn_id;
    fields[kAgentsReadBackField] = true;
    return ParseAgentEvent(fields);
  };
  for (const AgentItem& item : items) {
    if (item.type == "message" && item.role == "user") continue;  // the input, never streamed
    SANDGATE_RETURN_IF_ERROR(
        deliver(made("agent.session.turn.item.added", item.turn_id, {{"item", item.raw}})));
    if (*stopped) return absl::OkStatus();
    if (ItemIsOpen(item.status)) {
      if (!state->items_done.contains(item.id)) state->items_gapped.insert(item.id);
      continue;
    }
    SANDGATE_RETURN_IF_ERROR(
        deliver(made("agent.session.turn.item.done", item.turn_id, {{"item", item.raw}})));
    if (*stopped) return absl::OkStatus();
  }
  std::stable_sort(turns.begin(), turns.end(), [](const AgentTurn& a, const AgentTurn& b) {
    return a.created_at < b.created_at;
  });
  for (const AgentTurn& turn : turns) {
    if (!turn.IsFinished()) continue;
    json fields = {{"turn", turn.raw}};
    if (turn.usage.has_value()) fields["usage"] = turn.usage->raw;
    SANDGATE_RETURN_IF_ERROR(
        deliver(made(absl::StrCat("agent.session.turn.", turn.status_text), turn.id, fields)));
    if (*stopped) return absl::OkStatus();
  }
  log::Info("agents.stream_read_back", {{"session", session_id},
                                        {"turns", static_cast<int64_t>(turns.size())},
                                        {"items", static_cast<int64_t>(items.size())},
                                        {"delivered", state->delivered - before}});
  return absl::OkStatus();
}

// --- Items ---

absl::StatusOr<std::vector<AgentItem>> AgentsClient::ListItems(absl::string_view session_id,
                                                               const CancelToken* cancel) {
  return transport_.ListAllAs<AgentItem>(
      absl::StrCat(kSessions, "/", Escape(session_id), "/items?order=asc"), ParseAgentItem, cancel);
}

// --- Turns ---

absl::StatusOr<std::vector<AgentTurn>> AgentsClient::ListTurns(absl::string_view session_id,
                                                               const CancelToken* cancel) {
  return transport_.ListAllAs<AgentTurn>(absl::StrCat(kSessions, "/", Escape(session_id), "/turns"),
                                         ParseAgentTurn, cancel);
}

absl::StatusOr<AgentTurn> AgentsClient::GetTurn(absl::string_view session_id,
                                                absl::string_view turn_id,
                                                const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(
      json j,
      transport_.JsonCall(
          "GET", absl::StrCat(kSessions, "/", Escape(session_id), "/turns/", Escape(turn_id)),
          nullptr, cancel));
  return ParseAgentTurn(j);
}

// --- Artifacts ---

absl::StatusOr<AgentArtifactPage> AgentsClient::ListArtifacts(absl::string_view session_id,
                                                              const AgentArtifactListParams& params,
                                                              const CancelToken* cancel) {
  std::vector<std::string> terms;
  if (!params.environment_id.empty()) {
    terms.push_back(absl::StrCat("environment_id=", Escape(params.environment_id)));
  }
  AddCursorTerms(params.after, params.limit, params.order, &terms);
  SANDGATE_ASSIGN_OR_RETURN(
      json j,
      transport_.JsonCall(
          "GET", WithQuery(absl::StrCat(kSessions, "/", Escape(session_id), "/artifacts"), terms),
          nullptr, cancel));
  return ReadPage<AgentArtifact>(j, ParseAgentArtifact);
}

absl::StatusOr<std::vector<AgentArtifact>> AgentsClient::ListAllArtifacts(
    absl::string_view session_id, const CancelToken* cancel) {
  return transport_.ListAllAs<AgentArtifact>(
      absl::StrCat(kSessions, "/", Escape(session_id), "/artifacts"), ParseAgentArtifact, cancel);
}

absl::StatusOr<std::string> AgentsClient::ArtifactContent(absl::string_view session_id,
                                                          absl::string_view artifact_id,
                                                          size_t max_bytes,
                                                          const CancelToken* cancel) {
  return transport_.Download(absl::StrCat(kSessions, "/", Escape(session_id), "/artifacts/",
                                          Escape(artifact_id), "/content"),
                             "application/octet-stream", max_bytes,
                             absl::StrCat("artifact ", artifact_id), cancel);
}

// --- Environments ---

absl::StatusOr<AgentEnvironment> AgentsClient::GetEnvironment(absl::string_view environment_id,
                                                              const CancelToken* cancel) {
  SANDGATE_ASSIGN_OR_RETURN(
      json j,
      transport_.JsonCall("GET", absl::StrCat("/agents/environments/", Escape(environment_id)),
                          nullptr, cancel));
  return ParseAgentEnvironment(j);
}

}  // namespace sandgate::upstream
