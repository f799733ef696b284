// AgentsClient: the OpenAI Agents API (beta; docs/openai-api.md §7) as typed calls.
//
// Sessions (create, streaming create, get, list, delete), input events (message, cancel), the
// session's Server-Sent-Events stream, turns, artifacts (list, content) and environments.
// Every call sends `OpenAI-Beta: agents=v1` and goes through OpenAiTransport, so credential
// handling, error mapping, key redaction and (with a RetryingHttpClient underneath) the retry
// policy are the same as for every other OpenAI call.
//
// The API is beta, so everything about its shapes lives in this client (this header, the calls
// in agents_client.cc, the JSON shapes in agents_json.cc) and nowhere else:
//  - What sandgate reads is parsed into small structs; each keeps the object it came from in
//    `raw`, and every event is delivered with its raw JSON (for agents-events.jsonl).
//  - Status values are strings upstream; they are mapped to enums with a kUnknown member and
//    the original text kept. An unknown value or event type is logged and passed on, never
//    fatal. Fields that are absent read as empty / zero / nullopt.
//
// Resuming the event stream: §7 documents `GET /agents/sessions/{id}/events` with no resume
// cursor (no `starting_after`, unlike Responses), §10 is silent, and the openai npm client
// 7.59.0 calls it "live events" with `include_obfuscation` as its only parameter. So a reconnect
// asks for the stream again (sending the standard SSE `Last-Event-ID` when the server gave `id:`
// lines, which a server may honour or ignore) and, once it is answered and before its first
// event, reads back the gap from the session's turns and items (GET …/turns, then …/items:
// a turn over by the first read has every item in the second). What the events have not said
// yet becomes events of the same shape, marked `"sandgate_read_back": true` and without an
// `event_id`, in order: each item added, each finished item done, then each finished turn's
// end (with its usage), so a turn that ended during the gap ends the stream at once. Because
// the stream was already listening when the read-back ran, nothing after it is missed.
// Everything delivered is de-duplicated: by `event_id` (a server that replays, as the fake
// does by default), and by what it says (an item added or done, a turn ended: once each, from
// whichever source came first). A command that was running across a break has no reliable
// stream of output any more (deltas carry no offsets; a replaying server repeats them, a live
// one lost some), so its later deltas are dropped and its `item.done` carries the whole output:
// the consumer relays what its deltas had not (agent/agents_events.h does).
//
//   RetryingHttpClient http(&curl, RetryOptions{});
//   AgentsClient agents(&http, &key);
//   AgentSessionRequest req;
//   req.agent.model = "gpt-6-astra";
//   req.environment.files.push_back({AgentFile::Kind::kInline, "/workspace/in.csv", csv, ""});
//   req.input = "Analyse /workspace/in.csv; write outputs under /workspace/outputs";
//   AgentEventStreamState state;
//   SANDGATE_ASSIGN_OR_RETURN(AgentSession s, agents.CreateSessionStream(req, &state,
//       [&](const AgentEvent& e, bool* stop) {
//         if (e.kind == AgentEventKind::kTurnStatus && e.turn->IsFinished()) *stop = true;
//         return Map(e);
//       }, &cancel));
//   SANDGATE_ASSIGN_OR_RETURN(std::vector<AgentArtifact> out, agents.ListAllArtifacts(s.id));
#ifndef SANDGATE_UPSTREAM_AGENTS_CLIENT_H_
#define SANDGATE_UPSTREAM_AGENTS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/cancel.h"
#include "nlohmann/json.hpp"
#include "upstream/credentials.h"
#include "upstream/http_client.h"
#include "upstream/openai_transport.h"

namespace sandgate::upstream {

inline constexpr absl::string_view kAgentsBetaHeader = "OpenAI-Beta";
inline constexpr absl::string_view kAgentsBetaValue = "agents=v1";
// Marks an event made from the session's turns and items after a break (see "Resuming").
inline constexpr char kAgentsReadBackField[] = "sandgate_read_back";

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

// One entry of environment.files: placed at `path` (absolute, under /workspace) before the
// agent starts.
struct AgentFile {
  enum class Kind { kInline, kFileId };
  Kind kind = Kind::kInline;
  std::string path;
  std::string data;     // kInline: the raw bytes (the client base64-encodes them)
  std::string file_id;  // kFileId: a Files API id
};

// Run in order after packages and files, before the agent; a non-zero exit keeps the agent
// from starting. Confidential upstream (never echoed).
struct AgentSetupCommand {
  std::string command;
  std::string cwd;  // empty: the server default (/workspace)
};

struct AgentNetwork {
  std::string access = "disabled";           // "enabled" | "disabled" | "restricted"
  std::vector<std::string> allowed_domains;  // restricted: 1..100 exact host names
  std::vector<std::string> blocked_domains;  // restricted only
};

struct AgentEnvironmentSpec {
  std::string type = "openai_hosted";   // "openai_hosted" | "self_hosted" | "none"
  std::string container_size;           // "small" | "medium" | "large"; empty: server default
  std::optional<AgentNetwork> network;  // nullopt: server default (differs beta vs GA)
  std::vector<AgentFile> files;
  std::vector<AgentSetupCommand> setup_commands;
  std::map<std::string, std::string> env;
  std::vector<std::string> python_packages;
  std::vector<std::string> system_packages;
  std::vector<std::string> npm_packages;
  std::string environment_template_id;
  std::string workspace_directory;  // self_hosted only
  // Merged last into the environment object, for fields this struct does not model.
  nlohmann::json extra = nlohmann::json::object();
};

struct AgentConfig {
  std::string model;  // required unless AgentSessionRequest::agent_id is set
  std::string instructions;
  // Merged last into the agent object (tools, reasoning, text, ...).
  nlohmann::json extra = nlohmann::json::object();
};

struct AgentSessionRequest {
  AgentConfig agent;
  std::string agent_id;  // a stored agent instead of `agent`
  AgentEnvironmentSpec environment;
  std::string input;  // the first user message; required for streaming creates (not self_hosted)
  std::map<std::string, std::string> metadata;  // at most 16 pairs
};

// ---------------------------------------------------------------------------------------------
// Objects (the fields sandgate reads; `raw` is the whole object as received)
// ---------------------------------------------------------------------------------------------

struct AgentUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t total_tokens = 0;
  int64_t cached_tokens = 0;     // input_tokens_details.cached_tokens
  int64_t reasoning_tokens = 0;  // output_tokens_details.reasoning_tokens
  nlohmann::json raw;
};

enum class AgentEnvironmentStatus {
  kPending,
  kReady,
  kConnected,
  kDisconnected,
  kSuspended,
  kExpired,
  kFailed,
  kUnknown,  // a value this client does not know (or none); see status_text
};

struct AgentEnvironment {
  std::string id;
  std::string type;
  AgentEnvironmentStatus status = AgentEnvironmentStatus::kUnknown;
  std::string status_text;
  std::string container_size;
  nlohmann::json error;  // null when none
  nlohmann::json raw;
};

enum class AgentSessionStatus { kIdle, kInProgress, kRequiresAction, kFailed, kUnknown };

struct AgentSession {
  std::string id;
  AgentSessionStatus status = AgentSessionStatus::kUnknown;
  std::string status_text;
  int64_t created_at = 0;
  int64_t last_active_at = 0;
  AgentEnvironment environment;
  std::optional<AgentUsage> usage;
  nlohmann::json error;                         // null when none
  nlohmann::json required_actions;              // array; empty when none
  std::map<std::string, std::string> metadata;  // its string pairs (others are skipped)
  nlohmann::json raw;
};

enum class AgentTurnStatus {
  kQueued,
  kInProgress,
  kWaiting,
  kCompleted,
  kFailed,
  kCancelled,
  kUnknown,
};

struct AgentTurn {
  std::string id;
  std::string session_id;
  AgentTurnStatus status = AgentTurnStatus::kUnknown;
  std::string status_text;
  int64_t created_at = 0;
  int64_t started_at = 0;    // 0 when absent
  int64_t completed_at = 0;  // 0 when absent
  std::optional<AgentUsage> usage;
  nlohmann::json error;  // null when none
  nlohmann::json raw;

  // completed, failed or cancelled: the turn will not change again.
  bool IsFinished() const;
};

// An item of type command_execution.
struct AgentCommandExecution {
  std::string id;
  std::string turn_id;
  std::string command;
  std::string cwd;
  std::string status;  // a free string upstream ("in_progress", "completed", "failed", ...)
  std::optional<int> exit_code;  // nullopt while running or when absent
  int64_t duration_ms = 0;
  std::string output;  // the whole output, on item.done
};

// One turn item (command_execution, message, reasoning, ... or a type not known yet).
struct AgentItem {
  std::string id;
  std::string type;
  std::string turn_id;
  std::string status;
  std::optional<AgentCommandExecution> command;  // type == "command_execution"
  // type == "message": its output_text parts joined; role "assistant" or "user" (the input
  // echoed); phase "commentary" | "final_answer" | "" (absent).
  std::string text;
  std::string role;
  std::string phase;
  nlohmann::json raw;
};

struct AgentArtifact {
  std::string id;
  std::string path;
  int64_t size_bytes = 0;
  int64_t created_at = 0;
  std::string environment_id;
  std::string session_id;
  std::string turn_id;
  nlohmann::json raw;
};

struct AgentArtifactListParams {
  std::string environment_id;
  std::string after;
  int limit = 0;      // 0: server default
  std::string order;  // "asc" | "desc"; empty: server default
};

// One page of a cursor list.
template <typename T>
struct AgentListPage {
  std::vector<T> data;
  bool has_more = false;
  std::string last_id;  // pass as `after` for the next page
};
using AgentArtifactPage = AgentListPage<AgentArtifact>;

struct AgentSessionListParams {
  std::string after;
  int limit = 0;      // 0: server default
  std::string order;  // "asc" | "desc"; empty: server default
};
using AgentSessionPage = AgentListPage<AgentSession>;

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------

// What an event is about, so a caller can switch on it; the exact `type` is kept as well.
enum class AgentEventKind {
  kSessionStatus,       // agent.session.{created,in_progress,idle,requires_action,failed}
  kTurnStatus,          // agent.session.turn.{created,in_progress,completed,failed,cancelled}
  kItemAdded,           // agent.session.turn.item.added
  kItemDone,            // agent.session.turn.item.done
  kCommandOutputDelta,  // agent.output.command_execution_output.delta
  kOutputTextDelta,     // ….output_text.delta
  kOutputTextDone,      // ….output_text.done
  kEnvironmentStatus,   // agent.session.environment.{pending,ready,connected,...}
  kEnvironmentReset,    // agent.session.environment.reset: sandbox replaced, files lost
  kError,               // error
  kOther,               // known families not modelled (content_part, reasoning, subagent) and
                        // types this client does not know (logged once per stream)
};

struct AgentEvent {
  AgentEventKind kind = AgentEventKind::kOther;
  std::string type;
  std::string event_id;  // empty if the server sent none (such an event is never deduplicated)
  std::string session_id;
  std::string turn_id;
  // Filled for the events that carry them.
  std::optional<AgentSession> session;          // kSessionStatus
  std::optional<AgentTurn> turn;                // kTurnStatus
  std::optional<AgentEnvironment> environment;  // kEnvironment*
  std::optional<AgentItem> item;                // kItem*
  std::optional<AgentUsage> usage;              // the event's usage, else its turn's
  std::string item_id;                          // deltas
  std::string delta;                            // deltas; kOutputTextDone: the whole text
  std::string error_message;                    // kError, and failed session/turn/environment
  nlohmann::json raw;                           // the event as received
};

// Called once per new event, in order, on the calling thread. Set `*stop` to end the stream
// on purpose (the call returns OK); a non-OK return ends it and becomes the call's result.
using AgentEventCallback = std::function<absl::Status(const AgentEvent& event, bool* stop)>;

// What a consumer has seen of one session's events, carried across reconnects so that no
// event is delivered twice (see "Resuming" above). Not thread safe: one per consumer.
struct AgentEventStreamState {
  absl::flat_hash_set<std::string> seen_event_ids;
  // What the delivered events said, so that a read-back and a replay say it only once.
  absl::flat_hash_set<std::string> items_added;
  absl::flat_hash_set<std::string> items_done;
  absl::flat_hash_set<std::string> turns_finished;
  // Items running across a break: their output deltas are dropped until they are done.
  absl::flat_hash_set<std::string> items_gapped;
  int read_backs = 0;       // gaps read back from the session's turns and items
  std::string last_sse_id;  // the last SSE `id:` seen; sent as Last-Event-ID on a reconnect
  std::string session_id;   // known once the create stream's first session event arrived
  int64_t delivered = 0;    // events handed to the callback
  int reconnects = 0;       // streams opened again after a break
  // The last call returned because the server ended the stream cleanly, not because the
  // callback stopped it (the fake ends a create stream once the session rests; call
  // StreamEvents with this state to follow on).
  bool server_ended = false;
};

struct AgentsOptions {
  OpenAiOptions http;  // OpenAI-Beta is added to http.extra_headers by the client
  // A whole event stream may last this long (a turn can run for a long time).
  absl::Duration stream_timeout = absl::Hours(2);
  // Reconnects after a stream broke (the connection dropped mid-body) without a new event in
  // between; then the call fails with IsBrokenStream. A stream the server ends cleanly is not
  // broken and is not reopened.
  int max_stream_reconnects = 3;
};

// Thread safe if the HttpClient and Credentials are: the client holds no mutable state.
// `http` and `credentials` are not owned and must outlive the client. `cancel` arguments may
// be null; a fired token makes the call fail with CANCELLED. Errors as in openai_transport.h.
class AgentsClient {
 public:
  AgentsClient(HttpClient* http, const Credentials* credentials,
               std::string base_url = std::string(kOpenAiDefaultBaseUrl),
               AgentsOptions options = {});

  const std::string& base_url() const { return transport_.base_url(); }

  // --- Sessions ---
  // POST /agents/sessions (not streaming). Invalid requests fail with INVALID_ARGUMENT naming
  // the field before anything is sent.
  absl::StatusOr<AgentSession> CreateSession(const AgentSessionRequest& request,
                                             const CancelToken* cancel = nullptr);
  // POST /agents/sessions with "stream": true: delivers the session's events as they come
  // (the first carries the new session: journal its id from there) until `on_event` stops or
  // fails or the server ends the stream (state->server_ended). A create is never sent twice: if the
  // stream breaks once the session id is known, it is resumed on GET …/events as StreamEvents does;
  // before that, the call fails with IsBrokenStream (a session may exist; find it by its metadata).
  // Returns the latest session object seen on the stream.
  absl::StatusOr<AgentSession> CreateSessionStream(const AgentSessionRequest& request,
                                                   AgentEventStreamState* state,
                                                   const AgentEventCallback& on_event,
                                                   const CancelToken* cancel = nullptr);
  absl::StatusOr<AgentSession> GetSession(absl::string_view session_id,
                                          const CancelToken* cancel = nullptr);
  // GET /agents/sessions: one page of the key's sessions (those of every host using the key).
  absl::StatusOr<AgentSessionPage> ListSessions(const AgentSessionListParams& params = {},
                                                const CancelToken* cancel = nullptr);
  // Every session (follows the cursor, a bounded number of pages): how a session whose id was
  // never learned is found again, by the metadata its create set.
  absl::StatusOr<std::vector<AgentSession>> ListAllSessions(const CancelToken* cancel = nullptr);
  // Deletion may abandon unpublished outputs and finish asynchronously upstream; cancel a
  // running turn first (SendCancel). NOT_FOUND when already gone.
  absl::Status DeleteSession(absl::string_view session_id, const CancelToken* cancel = nullptr);

  // --- Input events (POST …/events, empty 2xx) ---
  // `idempotency_key` is sent as Idempotency-Key, so a repeated send (a retry, or the caller
  // again after a restart with the same key) starts one turn only; empty: a random key.
  absl::Status SendMessage(absl::string_view session_id, absl::string_view text,
                           absl::string_view idempotency_key = "",
                           const CancelToken* cancel = nullptr);
  absl::Status SendCancel(absl::string_view session_id, absl::string_view idempotency_key = "",
                          const CancelToken* cancel = nullptr);
  // Any input events ({"type": "agent.session.input.…", …}), sent as {"events": events}.
  absl::Status PostEvents(absl::string_view session_id, const nlohmann::json& events,
                          absl::string_view idempotency_key = "",
                          const CancelToken* cancel = nullptr);

  // --- The event stream ---
  // GET /agents/sessions/{id}/events: delivers each event not yet in `state` until `on_event`
  // stops or fails or the server ends the stream (OK, state->server_ended); reconnects after a
  // break, reading back the gap, as described above (a read-back that fails ends the call
  // with its error). A stream that still breaks
  // fails with UNAVAILABLE and IsBrokenStream (call again with the same state to go on).
  absl::Status StreamEvents(absl::string_view session_id, AgentEventStreamState* state,
                            const AgentEventCallback& on_event,
                            const CancelToken* cancel = nullptr);

  // --- Items ---
  // Every item of the session, oldest first (user messages, command executions, assistant
  // messages, ...): how a caller learns what happened while its event stream was down on a
  // server that does not replay.
  absl::StatusOr<std::vector<AgentItem>> ListItems(absl::string_view session_id,
                                                   const CancelToken* cancel = nullptr);

  // --- Turns ---
  // Every turn of the session (follows the list cursor).
  absl::StatusOr<std::vector<AgentTurn>> ListTurns(absl::string_view session_id,
                                                   const CancelToken* cancel = nullptr);
  absl::StatusOr<AgentTurn> GetTurn(absl::string_view session_id, absl::string_view turn_id,
                                    const CancelToken* cancel = nullptr);

  // --- Artifacts ---
  absl::StatusOr<AgentArtifactPage> ListArtifacts(absl::string_view session_id,
                                                  const AgentArtifactListParams& params = {},
                                                  const CancelToken* cancel = nullptr);
  // Every artifact of the session (follows the cursor, a bounded number of pages).
  absl::StatusOr<std::vector<AgentArtifact>> ListAllArtifacts(absl::string_view session_id,
                                                              const CancelToken* cancel = nullptr);
  // The artifact's bytes; more than `max_bytes` fails with RESOURCE_EXHAUSTED as soon as they
  // have arrived, so a huge artifact is never held in memory.
  absl::StatusOr<std::string> ArtifactContent(absl::string_view session_id,
                                              absl::string_view artifact_id, size_t max_bytes,
                                              const CancelToken* cancel = nullptr);

  // --- Environments ---
  absl::StatusOr<AgentEnvironment> GetEnvironment(absl::string_view environment_id,
                                                  const CancelToken* cancel = nullptr);

 private:
  // The create stream (`create_request` not null: POSTed once) or the events stream, then
  // GET …/events again after each break, as described for StreamEvents. `*latest` is the last
  // session object an event carried.
  absl::Status Stream(const nlohmann::json* create_request, AgentEventStreamState* state,
                      const AgentEventCallback& on_event, std::optional<AgentSession>* latest,
                      const CancelToken* cancel);
  // Reads back what the session's turns and items say and the events have not, as events
  // handed to `deliver` (see "Resuming" above); stops early once `*stopped`.
  absl::Status ReadBack(AgentEventStreamState* state,
                        const std::function<absl::Status(const AgentEvent&)>& deliver,
                        const bool* stopped, const CancelToken* cancel);

  // Declared first: the constructor builds transport_ from it (adding the OpenAI-Beta header).
  const AgentsOptions options_;
  const OpenAiTransport transport_;
};

// The request body of a session create (without "stream"), or INVALID_ARGUMENT naming the
// field. Exposed for tests and for logging what was asked (it holds file contents and setup
// commands: never log it whole).
absl::StatusOr<nlohmann::json> AgentSessionRequestJson(const AgentSessionRequest& request);

// Parsers of the upstream objects; lenient (absent fields read as empty), they fail only when
// the object has no id. Exposed for callers that read objects from raw events.
absl::StatusOr<AgentSession> ParseAgentSession(const nlohmann::json& j);
absl::StatusOr<AgentTurn> ParseAgentTurn(const nlohmann::json& j);
absl::StatusOr<AgentArtifact> ParseAgentArtifact(const nlohmann::json& j);
absl::StatusOr<AgentItem> ParseAgentItem(const nlohmann::json& j);
absl::StatusOr<AgentEnvironment> ParseAgentEnvironment(const nlohmann::json& j);
// Never fails: an event of any shape becomes an AgentEvent (kOther when not understood).
// `known_type` (may be null) says whether the type is one of the families of §7.
AgentEvent ParseAgentEvent(const nlohmann::json& j, bool* known_type = nullptr);

}  // namespace sandgate::upstream

#endif  // SANDGATE_UPSTREAM_AGENTS_CLIENT_H_
