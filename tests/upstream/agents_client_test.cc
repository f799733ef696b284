#include "upstream/agents_client.h"

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "common/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/fakes/fake_credentials.h"
#include "tests/fakes/fake_http_client.h"
#include "tests/upstream/loopback_http_server.h"
#include "upstream/curl_http_client.h"
#include "upstream/retry.h"

namespace sandgate::upstream {
namespace {

using ::nlohmann::json;
using ::sandgate::testing::FakeCredentials;
using ::sandgate::testing::FakeHttpClient;
using ::sandgate::testing::RecordedRequest;
using ::sandgate::testing::ScriptedReply;
using ::sandgate::upstream::testing::LoopbackHttpServer;
using ::sandgate::upstream::testing::ReceivedRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kKey[] = "sk-test-THE-AGENTS-KEY-0123456789";
constexpr char kBase[] = "https://upstream.example/v1";

// One SSE frame carrying `event` as its data, with an event: line (and an id: line if given).
std::string Frame(const json& event, const std::string& sse_id = "") {
  std::string out;
  if (!sse_id.empty()) out += "id: " + sse_id + "\n";
  out += "event: " + event.value("type", std::string()) + "\n";
  return out + "data: " + event.dump() + "\n\n";
}

json Event(const std::string& type, const std::string& event_id, json fields = json::object()) {
  fields["type"] = type;
  fields["event_id"] = event_id;
  fields["session_id"] = "sess_1";
  return fields;
}

json SessionObject(const std::string& status) {
  return {
      {"id", "sess_1"},
      {"object", "agent.session"},
      {"status", status},
      {"created_at", 100},
      {"last_active_at", 101},
      {"error", nullptr},
      {"required_actions", json::array()},
      {"usage", nullptr},
      {"environment", {{"type", "openai_hosted"}, {"id", "env_1"}, {"container_size", "small"}}}};
}

// The frame of turn_1's completion.
std::string TurnCompleted(const std::string& event_id) {
  return Frame(Event("agent.session.turn.completed", event_id,
                     {{"turn", {{"id", "turn_1"}, {"status", "completed"}}}}));
}

// `j` with `more`'s members set.
json With(json j, const json& more) {
  j.update(more);
  return j;
}

// A list page holding `data`, the last one.
ScriptedReply Page(json data = json::array()) {
  return ScriptedReply::Json(200, {{"object", "list"}, {"data", data}, {"has_more", false}});
}

// The read-back after a reconnect when the session's turns and items add nothing.
void PushNothingToReadBack(FakeHttpClient& http) {
  http.Push(Page());
  http.Push(Page());
}

// Collects what a stream delivered; stops at a finished turn.
struct Collector {
  std::vector<AgentEvent> events;
  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    for (const AgentEvent& e : events) out.push_back(e.event_id);
    return out;
  }
  AgentEventCallback Callback() {
    return [this](const AgentEvent& e, bool* stop) {
      events.push_back(e);
      if (e.kind == AgentEventKind::kTurnStatus && e.turn->IsFinished()) *stop = true;
      return absl::OkStatus();
    };
  }
};

class AgentsClientTest : public ::testing::Test {
 protected:
  AgentsClientTest() : creds_(kKey), client_(&http_, &creds_, kBase) {}

  static AgentSessionRequest HostedRequest() {
    AgentSessionRequest req;
    req.agent.model = "gpt-6-astra";
    req.input = "Count lines of in.txt";
    req.environment.container_size = "small";
    req.environment.network = AgentNetwork{};
    return req;
  }

  FakeHttpClient http_;
  FakeCredentials creds_;
  AgentsClient client_;
};

TEST_F(AgentsClientTest, EveryCallSendsTheBetaHeaderAndTheKey) {
  http_.Push(ScriptedReply::Json(200, SessionObject("in_progress")));
  http_.Push(ScriptedReply::Json(200, SessionObject("idle")));
  http_.Push(ScriptedReply::Status(204));
  http_.Push(ScriptedReply::Status(204));
  http_.Push(ScriptedReply::Stream({Frame(Event("agent.session.turn.completed", "e1"))}));
  http_.Push(ScriptedReply::Json(200, {{"data", json::array()}, {"has_more", false}}));
  http_.Push(ScriptedReply::Json(200, {{"id", "turn_1"}, {"status", "completed"}}));
  http_.Push(ScriptedReply::Json(200, {{"data", json::array()}, {"has_more", false}}));
  http_.Push(ScriptedReply::Stream({"bytes"}));
  http_.Push(ScriptedReply::Json(200, {{"id", "env_1"}, {"status", "connected"}}));
  http_.Push(ScriptedReply::Json(200, {{"id", "sess_1"}, {"deleted", true}}));

  EXPECT_TRUE(client_.CreateSession(HostedRequest()).ok());
  EXPECT_TRUE(client_.GetSession("sess_1").ok());
  EXPECT_TRUE(client_.SendMessage("sess_1", "go").ok());
  EXPECT_TRUE(client_.SendCancel("sess_1").ok());
  AgentEventStreamState state;
  Collector seen;
  EXPECT_TRUE(client_.StreamEvents("sess_1", &state, seen.Callback()).ok());
  EXPECT_TRUE(client_.ListTurns("sess_1").ok());
  EXPECT_TRUE(client_.GetTurn("sess_1", "turn_1").ok());
  EXPECT_TRUE(client_.ListArtifacts("sess_1").ok());
  EXPECT_TRUE(client_.ArtifactContent("sess_1", "art_1", 100).ok());
  EXPECT_TRUE(client_.GetEnvironment("env_1").ok());
  EXPECT_TRUE(client_.DeleteSession("sess_1").ok());

  const std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 11u);
  for (const RecordedRequest& r : reqs) {
    EXPECT_EQ(r.headers.Get("openai-beta"), "agents=v1") << r.method << " " << r.url;
    EXPECT_EQ(r.headers.Get("authorization"), std::string("Bearer ") + kKey) << r.url;
  }
  const std::string s = std::string(kBase) + "/agents/sessions";
  EXPECT_EQ(reqs[0].method + " " + reqs[0].url, "POST " + s);
  EXPECT_EQ(reqs[1].method + " " + reqs[1].url, "GET " + s + "/sess_1");
  EXPECT_EQ(reqs[2].method + " " + reqs[2].url, "POST " + s + "/sess_1/events");
  EXPECT_EQ(reqs[4].method + " " + reqs[4].url, "GET " + s + "/sess_1/events");
  EXPECT_EQ(reqs[4].headers.Get("accept"), "text/event-stream");
  EXPECT_EQ(reqs[5].url, s + "/sess_1/turns?limit=100");
  EXPECT_EQ(reqs[6].url, s + "/sess_1/turns/turn_1");
  EXPECT_EQ(reqs[7].url, s + "/sess_1/artifacts");
  EXPECT_EQ(reqs[8].url, s + "/sess_1/artifacts/art_1/content");
  EXPECT_EQ(reqs[8].headers.Get("accept"), "application/octet-stream");
  EXPECT_EQ(reqs[9].url, std::string(kBase) + "/agents/environments/env_1");
  EXPECT_EQ(reqs[10].method + " " + reqs[10].url, "DELETE " + s + "/sess_1");
}

TEST_F(AgentsClientTest, CreateSessionSendsTheEnvironmentInTheShapeOfSection7) {
  AgentSessionRequest req = HostedRequest();
  req.agent.instructions = "Be brief.";
  req.environment.network = AgentNetwork{"restricted", {"pypi.org", "files.pythonhosted.org"}, {}};
  req.environment.files.push_back({AgentFile::Kind::kInline, "/workspace/in.txt", "hello\n", ""});
  req.environment.files.push_back({AgentFile::Kind::kFileId, "/workspace/big.csv", "", "file-9"});
  req.environment.setup_commands.push_back({"mkdir -p /workspace/outputs", ""});
  req.environment.setup_commands.push_back({"pip list", "/tmp"});
  req.environment.env = {{"RUN_ID", "run-42"}};
  req.environment.python_packages = {"pandas"};
  req.metadata = {{"sandgate_run", "run-42"}};
  http_.Push(ScriptedReply::Json(200, SessionObject("in_progress")));

  absl::StatusOr<AgentSession> s = client_.CreateSession(req);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, "sess_1");
  EXPECT_EQ(s->status, AgentSessionStatus::kInProgress);
  EXPECT_EQ(s->environment.id, "env_1");
  EXPECT_EQ(s->environment.container_size, "small");
  EXPECT_EQ(s->raw["object"], "agent.session");

  const json body = http_.JsonBodies("/agents/sessions")[0];
  EXPECT_EQ(body, json::parse(R"({
    "agent": {"model": "gpt-6-astra", "instructions": "Be brief."},
    "environment": {
      "type": "openai_hosted", "container_size": "small",
      "network": {"access": "restricted",
                  "allowed_domains": ["pypi.org", "files.pythonhosted.org"]},
      "files": [{"type": "inline", "path": "/workspace/in.txt", "data": "aGVsbG8K"},
                {"type": "file_id", "file_id": "file-9", "path": "/workspace/big.csv"}],
      "setup_commands": [{"command": "mkdir -p /workspace/outputs"},
                         {"command": "pip list", "cwd": "/tmp"}],
      "env": {"RUN_ID": "run-42"},
      "packages": {"python": ["pandas"]}},
    "input": "Count lines of in.txt",
    "metadata": {"sandgate_run": "run-42"}})"));
  EXPECT_EQ(http_.requests()[0].headers.Get("content-type"), "application/json");
}

TEST_F(AgentsClientTest, BadRequestsAreRefusedNamingTheFieldWithoutCallingUpstream) {
  struct Case {
    std::function<void(AgentSessionRequest&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](AgentSessionRequest& r) { r.environment.network->access = "restricted"; },
       "environment.network.allowed_domains"},
      {[](AgentSessionRequest& r) { r.environment.network->allowed_domains = {"a.example"}; },
       "environment.network.allowed_domains"},
      {[](AgentSessionRequest& r) { r.environment.network->blocked_domains = {"a.example"}; },
       "environment.network.blocked_domains"},
      {[](AgentSessionRequest& r) {
         r.environment.files.push_back({AgentFile::Kind::kInline, "in.txt", "x", ""});
       },
       "environment.files[0].path"},
      {[](AgentSessionRequest& r) {
         r.environment.files.push_back({AgentFile::Kind::kFileId, "/workspace/a", "", ""});
       },
       "environment.files[0].file_id"},
      {[](AgentSessionRequest& r) {
         r.environment.setup_commands.push_back({"", ""});
       },
       "environment.setup_commands[0].command"},
      {[](AgentSessionRequest& r) { r.environment.type = "self_hosted"; },
       "environment.workspace_directory"},
      {[](AgentSessionRequest& r) { r.environment.type.clear(); }, "environment.type"},
      {[](AgentSessionRequest& r) { r.agent.model.clear(); }, "agent.model"},
      {[](AgentSessionRequest& r) {
         for (int i = 0; i < 17; ++i) r.metadata["k" + std::to_string(i)] = "v";
       },
       "metadata"},
  };
  for (const Case& c : cases) {
    AgentSessionRequest req = HostedRequest();
    c.edit(req);
    absl::Status s = client_.CreateSession(req).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(c.field + ":"));
  }
  AgentSessionRequest no_input = HostedRequest();
  no_input.input.clear();
  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.CreateSessionStream(no_input, &state, seen.Callback()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input:"));
  EXPECT_TRUE(http_.requests().empty());
}

TEST_F(AgentsClientTest, InputEventsCarryTheirShapeAndAnIdempotencyKey) {
  for (int i = 0; i < 4; ++i) http_.Push(ScriptedReply::Status(i % 2 == 0 ? 204 : 202));
  ASSERT_TRUE(client_.SendMessage("sess_1", "Analyse the file", "run-42-turn-1").ok());
  ASSERT_TRUE(client_.SendCancel("sess_1", "run-42-cancel").ok());
  ASSERT_TRUE(client_.SendCancel("sess_1").ok());
  ASSERT_TRUE(client_.SendCancel("sess_1").ok());

  const std::vector<json> bodies = http_.JsonBodies("/sess_1/events");
  ASSERT_EQ(bodies.size(), 4u);
  EXPECT_EQ(bodies[0], json::parse(R"({"events": [{"type": "agent.session.input.message",
      "input": [{"role": "user",
                 "content": [{"type": "input_text", "text": "Analyse the file"}]}]}]})"));
  EXPECT_EQ(bodies[1], json::parse(R"({"events": [{"type": "agent.session.input.cancel"}]})"));
  const std::vector<RecordedRequest> reqs = http_.requests();
  EXPECT_EQ(reqs[0].headers.Get("idempotency-key"), "run-42-turn-1");
  EXPECT_EQ(reqs[1].headers.Get("idempotency-key"), "run-42-cancel");
  // Without a caller's key each send gets its own.
  EXPECT_FALSE(reqs[2].headers.Get("idempotency-key").empty());
  EXPECT_NE(reqs[2].headers.Get("idempotency-key"), reqs[3].headers.Get("idempotency-key"));
  EXPECT_EQ(client_.PostEvents("sess_1", json::array()).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(AgentsClientTest, RetriesOn429And5xxWithTheSharedPolicyAndOneIdempotencyKey) {
  std::vector<absl::Duration> slept;
  RetryOptions retry_options;
  retry_options.sleep = [&](absl::Duration d, const CancelToken*) {
    slept.push_back(d);
    return false;
  };
  retry_options.uniform01 = [] { return 0.0; };
  RetryingHttpClient retrying(&http_, retry_options);
  AgentsClient client(&retrying, &creds_, kBase);

  http_.Push(ScriptedReply::Status(429, {{"retry-after-ms", "1500"}}));
  http_.Push(ScriptedReply::Status(502));
  http_.Push(ScriptedReply::Status(204));
  ASSERT_TRUE(client.SendMessage("sess_1", "go").ok());
  std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_THAT(slept, ElementsAre(absl::Milliseconds(1500), absl::Seconds(1)));
  EXPECT_EQ(reqs[0].headers.Get("idempotency-key"), reqs[2].headers.Get("idempotency-key"));
  for (const RecordedRequest& r : reqs) EXPECT_EQ(r.headers.Get("openai-beta"), "agents=v1");

  // Out of retries (2, the shared default): the last status, mapped as for every OpenAI call.
  for (int i = 0; i < 3; ++i) http_.Push(ScriptedReply::Status(503));
  absl::Status s = client.GetSession("sess_1").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("openai GET /agents/sessions/sess_1: HTTP 503"));
  EXPECT_EQ(http_.requests().size(), 6u);
}

TEST_F(AgentsClientTest, TheKeyNeverAppearsInAStatusOrALogLine) {
  const std::string echo = std::string("Incorrect API key provided: ") + kKey;
  http_.Push(ScriptedReply::Json(401, {{"error", {{"message", echo}, {"code", kKey}}}},
                                 {{"x-request-id", kKey}}));
  http_.Push(ScriptedReply::Fail(absl::UnavailableError(std::string("proxy said ") + kKey)));
  http_.Push(ScriptedReply::Json(403, {{"error", {{"message", echo}}}}));
  log::SetMinLevel(log::Level::kDebug);
  ::testing::internal::CaptureStderr();
  AgentEventStreamState state;
  Collector seen;
  std::vector<absl::Status> statuses = {
      client_.DeleteSession("sess_1"),
      client_.SendCancel("sess_1"),
      client_.StreamEvents("sess_1", &state, seen.Callback()),
  };
  const std::string logged = ::testing::internal::GetCapturedStderr();
  log::SetMinLevel(log::Level::kInfo);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(statuses[2].code(), absl::StatusCode::kPermissionDenied);
  for (const absl::Status& s : statuses) {
    EXPECT_THAT(s.message(), HasSubstr("[REDACTED]")) << s;
    EXPECT_THAT(s.message(), Not(HasSubstr(kKey))) << s;
  }
  EXPECT_THAT(logged, Not(HasSubstr(kKey)));
}

TEST_F(AgentsClientTest, CreateSessionStreamParsesEventsSplitAcrossChunks) {
  json item_added = Event("agent.session.turn.item.added", "e4", json::parse(R"({
      "turn_id": "turn_1",
      "item": {"type": "command_execution", "id": "item_1", "command": "wc -l in.txt",
               "cwd": "/workspace", "status": "in_progress"}})"));
  json item_done = item_added;
  item_done["type"] = "agent.session.turn.item.done";
  item_done["event_id"] = "e6";
  item_done["item"]["status"] = "completed";
  item_done["item"]["exit_code"] = 0;
  item_done["item"]["duration_ms"] = 12;
  item_done["item"]["output"] = "1 in.txt\n";
  const json message_done = Event("agent.session.turn.item.done", "e7", json::parse(R"({
      "turn_id": "turn_1",
      "item": {"type": "message", "id": "msg_1", "role": "assistant", "phase": "final_answer",
               "content": [{"type": "output_text", "text": "There is 1 line."}]}})"));
  const json turn_completed = Event("agent.session.turn.completed", "e8", json::parse(R"({
      "turn": {"id": "turn_1", "status": "completed"},
      "usage": {"input_tokens": 120, "output_tokens": 30,
                "input_tokens_details": {"cached_tokens": 100}}})"));
  const std::string stream =
      Frame(Event("agent.session.created", "e1", {{"session", SessionObject("in_progress")}})) +
      ": keep-alive comment\n\n" +
      Frame(Event("agent.session.environment.ready", "e2",
                  {{"environment", {{"id", "env_1"}, {"status", "ready"}}}})) +
      Frame(Event("agent.session.turn.created", "e3",
                  {{"turn", {{"id", "turn_1"}, {"status", "queued"}}}})) +
      Frame(item_added) +
      Frame(Event(
          "agent.output.command_execution_output.delta", "e5",
          {{"turn_id", "turn_1"}, {"item_id", "item_1"}, {"delta", "1 in"}, {"output_index", 0}})) +
      Frame(item_done) + Frame(message_done) + Frame(turn_completed) +
      Frame(Event("agent.session.idle", "e9", {{"session", SessionObject("idle")}}));
  // Cut at awkward places: inside JSON, between "\n" and "\n", inside "data:".
  std::vector<std::string> chunks;
  for (size_t i = 0; i < stream.size(); i += 7) chunks.push_back(stream.substr(i, 7));
  http_.Push(ScriptedReply::Stream(chunks));

  AgentEventStreamState state;
  Collector seen;
  absl::StatusOr<AgentSession> s =
      client_.CreateSessionStream(HostedRequest(), &state, seen.Callback());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, "sess_1");
  EXPECT_EQ(state.session_id, "sess_1");
  EXPECT_THAT(seen.ids(), ElementsAre("e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"));

  const json body = http_.JsonBodies("/agents/sessions")[0];
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["input"], "Count lines of in.txt");
  EXPECT_EQ(http_.requests()[0].headers.Get("accept"), "text/event-stream");

  const std::vector<AgentEvent>& e = seen.events;
  EXPECT_EQ(e[0].kind, AgentEventKind::kSessionStatus);
  EXPECT_EQ(e[0].session->environment.id, "env_1");
  EXPECT_EQ(e[1].kind, AgentEventKind::kEnvironmentStatus);
  EXPECT_EQ(e[1].environment->status, AgentEnvironmentStatus::kReady);
  EXPECT_EQ(e[2].turn->status, AgentTurnStatus::kQueued);
  EXPECT_EQ(e[3].kind, AgentEventKind::kItemAdded);
  ASSERT_TRUE(e[3].item->command.has_value());
  EXPECT_EQ(e[3].item->command->command, "wc -l in.txt");
  EXPECT_FALSE(e[3].item->command->exit_code.has_value());
  EXPECT_EQ(e[4].kind, AgentEventKind::kCommandOutputDelta);
  EXPECT_EQ(e[4].item_id, "item_1");
  EXPECT_EQ(e[4].delta, "1 in");
  EXPECT_EQ(e[5].kind, AgentEventKind::kItemDone);
  EXPECT_EQ(e[5].item->command->exit_code, 0);
  EXPECT_EQ(e[5].item->command->output, "1 in.txt\n");
  EXPECT_EQ(e[5].item->command->turn_id, "turn_1");
  EXPECT_EQ(e[6].item->type, "message");
  EXPECT_EQ(e[6].item->text, "There is 1 line.");
  EXPECT_EQ(e[6].item->role, "assistant");
  EXPECT_EQ(e[6].item->phase, "final_answer");
  EXPECT_EQ(e[7].kind, AgentEventKind::kTurnStatus);
  EXPECT_TRUE(e[7].turn->IsFinished());
  ASSERT_TRUE(e[7].usage.has_value());
  EXPECT_EQ(e[7].usage->total_tokens, 150);
  EXPECT_EQ(e[7].usage->cached_tokens, 100);
  // The raw event is what the server sent, for agents-events.jsonl.
  EXPECT_EQ(e[5].raw, item_done);
}

TEST_F(AgentsClientTest, UnknownEventTypesAndEnumValuesAreKeptAndLogged) {
  json odd_session = SessionObject("hibernating");
  http_.Push(ScriptedReply::Stream({
      Frame(Event("agent.session.teleported", "e1", {{"where", "moon"}})),
      Frame(Event("agent.session.in_progress", "e2", {{"session", odd_session}})),
      Frame(Event("agent.session.environment.thawing", "e3",
                  {{"environment", {{"id", "env_1"}, {"status", "thawing"}}}})),
      Frame(Event("agent.session.turn.completed", "e4",
                  {{"turn", {{"id", "turn_1"}, {"status", "completed_with_notes"}}}})),
      Frame(Event("agent.session.turn.failed", "e5", {{"turn_id", "turn_1"}})),
  }));
  log::SetMinLevel(log::Level::kDebug);
  ::testing::internal::CaptureStderr();
  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.StreamEvents("sess_1", &state, seen.Callback());
  const std::string logged = ::testing::internal::GetCapturedStderr();
  log::SetMinLevel(log::Level::kInfo);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_THAT(seen.ids(), ElementsAre("e1", "e2", "e3", "e4", "e5"));
  const std::vector<AgentEvent>& e = seen.events;
  EXPECT_EQ(e[0].kind, AgentEventKind::kOther);
  EXPECT_EQ(e[0].type, "agent.session.teleported");
  EXPECT_EQ(e[0].raw["where"], "moon");
  EXPECT_EQ(e[1].session->status, AgentSessionStatus::kUnknown);
  EXPECT_EQ(e[1].session->status_text, "hibernating");
  EXPECT_EQ(e[2].kind, AgentEventKind::kEnvironmentStatus);
  EXPECT_EQ(e[2].environment->status, AgentEnvironmentStatus::kUnknown);
  EXPECT_EQ(e[2].environment->status_text, "thawing");
  EXPECT_EQ(e[3].turn->status, AgentTurnStatus::kUnknown);
  EXPECT_FALSE(e[3].turn->IsFinished());
  // A turn event without a turn object still says what happened to which turn.
  EXPECT_EQ(e[4].turn->id, "turn_1");
  EXPECT_EQ(e[4].turn->status, AgentTurnStatus::kFailed);
  EXPECT_THAT(logged, HasSubstr("agents.unknown_value"));
  EXPECT_THAT(logged, HasSubstr("agent.session.teleported"));
  EXPECT_THAT(logged, HasSubstr("hibernating"));
}

TEST_F(AgentsClientTest, ABrokenEventStreamIsResumedWithoutDuplicates) {
  const std::string e1 = Frame(Event("agent.session.turn.created", "e1",
                                     {{"turn", {{"id", "turn_1"}, {"status", "queued"}}}}),
                               "1");
  const std::string e2 = Frame(Event("agent.session.turn.item.added", "e2"), "2");
  const std::string e3 = Frame(Event("agent.output.command_execution_output.delta", "e3",
                                     {{"item_id", "i1"}, {"delta", "x"}}),
                               "3");
  const std::string e4 = Frame(Event("agent.session.turn.completed", "e4",
                                     {{"turn", {{"id", "turn_1"}, {"status", "completed"}}}}),
                               "4");
  ScriptedReply broken = ScriptedReply::Stream({e1, e2.substr(0, e2.size() - 1)});
  broken.error = absl::UnavailableError("connection reset by peer");
  http_.Push(broken);
  http_.Push(ScriptedReply::Stream({e1, e2, e3, e4}));  // the fake replays from the start
  PushNothingToReadBack(http_);

  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.StreamEvents("sess_1", &state, seen.Callback());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen.ids(), ElementsAre("e1", "e2", "e3", "e4"));
  EXPECT_EQ(state.reconnects, 1);
  EXPECT_EQ(state.read_backs, 1);
  EXPECT_EQ(state.delivered, 4);
  const std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[1].method, "GET");
  EXPECT_EQ(reqs[1].url, std::string(kBase) + "/agents/sessions/sess_1/events");
  // Read back once the new stream listened: turns first, then items.
  EXPECT_EQ(reqs[2].url, std::string(kBase) + "/agents/sessions/sess_1/turns?limit=100");
  EXPECT_EQ(reqs[3].url, std::string(kBase) + "/agents/sessions/sess_1/items?order=asc&limit=100");
  EXPECT_EQ(reqs[0].headers.Find("last-event-id"), nullptr);
  EXPECT_EQ(reqs[1].headers.Get("last-event-id"), "1");  // e2 never completed
}

TEST_F(AgentsClientTest, ACreateStreamThatBreaksResumesOnTheEventsStreamAndIsNotSentAgain) {
  ScriptedReply broken = ScriptedReply::Stream(
      {Frame(Event("agent.session.created", "e1", {{"session", SessionObject("in_progress")}}))});
  broken.error = absl::UnavailableError("connection reset by peer");
  http_.Push(broken);
  http_.Push(ScriptedReply::Stream(
      {Frame(Event("agent.session.created", "e1", {{"session", SessionObject("in_progress")}})),
       TurnCompleted("e2")}));
  PushNothingToReadBack(http_);
  AgentEventStreamState state;
  Collector seen;
  absl::StatusOr<AgentSession> s =
      client_.CreateSessionStream(HostedRequest(), &state, seen.Callback());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, "sess_1");
  EXPECT_THAT(seen.ids(), ElementsAre("e1", "e2"));
  const std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 4u);
  EXPECT_EQ(reqs[0].method, "POST");
  EXPECT_EQ(reqs[1].method + " " + reqs[1].url,
            "GET " + std::string(kBase) + "/agents/sessions/sess_1/events");
}

TEST_F(AgentsClientTest, AStreamTheServerEndsIsNotReopenedAndTheCallerFollowsOn) {
  // The fake ends a create stream once the session rests; its events stream starts again at
  // the last rest, so following on replays that event.
  const std::string created =
      Frame(Event("agent.session.created", "e1", {{"session", SessionObject("idle")}}));
  const std::string idle =
      Frame(Event("agent.session.idle", "e2", {{"session", SessionObject("idle")}}));
  http_.Push(ScriptedReply::Stream({created, idle}));
  http_.Push(ScriptedReply::Stream(
      {idle, Frame(Event("agent.session.turn.created", "e3")), TurnCompleted("e4")}));
  AgentEventStreamState state;
  Collector seen;
  absl::StatusOr<AgentSession> s =
      client_.CreateSessionStream(HostedRequest(), &state, seen.Callback());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->status, AgentSessionStatus::kIdle);
  EXPECT_TRUE(state.server_ended);
  EXPECT_EQ(http_.requests().size(), 1u);

  ASSERT_TRUE(client_.StreamEvents(s->id, &state, seen.Callback()).ok());
  EXPECT_FALSE(state.server_ended);  // the callback stopped this one
  EXPECT_THAT(seen.ids(), ElementsAre("e1", "e2", "e3", "e4"));
  EXPECT_EQ(state.reconnects, 0);
  EXPECT_EQ(http_.requests().size(), 2u);
}

TEST_F(AgentsClientTest, ACreateStreamThatBreaksBeforeNamingTheSessionIsBrokenNotResent) {
  ScriptedReply broken = ScriptedReply::Stream({": provisioning\n\n"});
  broken.error = absl::UnavailableError("connection reset by peer");
  http_.Push(broken);
  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.CreateSessionStream(HostedRequest(), &state, seen.Callback()).status();
  EXPECT_TRUE(IsBrokenStream(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("a session may exist"));
  EXPECT_EQ(http_.requests().size(), 1u);
}

TEST_F(AgentsClientTest, AStreamThatKeepsBreakingWithoutNewEventsGivesUpAsBroken) {
  AgentsOptions options;
  options.max_stream_reconnects = 2;
  AgentsClient client(&http_, &creds_, kBase, options);
  const std::string e1 = Frame(Event("agent.session.turn.created", "e1"));
  for (int i = 0; i < 4; ++i) {
    ScriptedReply broken = ScriptedReply::Stream({e1});
    broken.error = absl::UnavailableError("connection reset by peer");
    http_.Push(broken);
    if (i > 0) PushNothingToReadBack(http_);  // each reconnect reads back the gap
  }
  http_.Push(ScriptedReply::Stream({e1}));  // must not be reached
  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client.StreamEvents("sess_1", &state, seen.Callback());
  EXPECT_TRUE(IsBrokenStream(s)) << s;
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("connection reset by peer"));
  EXPECT_THAT(seen.ids(), ElementsAre("e1"));
  // One stream with progress, then three without (each read back): the third exceeds the two
  // reconnects.
  EXPECT_EQ(http_.requests().size(), 4u + 3 * 2);
  EXPECT_EQ(http_.pending(), 1u);
}

// A server that streams only live events: the turn ended while the stream was down, so no
// event will ever say so. Once the new stream listens, the gap is read back from the turns and
// items: the finished command, the message and the turn's end arrive as events, in order,
// marked as read back, and the turn's end stops the stream at once.
TEST_F(AgentsClientTest, ATurnThatEndedInTheGapIsReadBackAndEndsTheStream) {
  ScriptedReply broken = ScriptedReply::Stream(
      {Frame(Event("agent.session.turn.created", "e1",
                   {{"turn", {{"id", "turn_1"}, {"status", "queued"}}}, {"turn_id", "turn_1"}})),
       Frame(Event("agent.session.turn.item.added", "e2",
                   {{"turn_id", "turn_1"},
                    {"item",
                     {{"type", "command_execution"},
                      {"id", "cmd_1"},
                      {"command", "ls"},
                      {"status", "in_progress"}}}})),
       Frame(Event("agent.output.command_execution_output.delta", "e3",
                   {{"item_id", "cmd_1"}, {"delta", "a"}}))});
  broken.error = absl::UnavailableError("connection reset by peer");
  http_.Push(broken);
  http_.Push(ScriptedReply::Stream({": keep-alive\n\n"}));  // live only: nothing more comes
  http_.Push(Page(json::array({{{"id", "turn_1"},
                                {"object", "agent.session.turn"},
                                {"status", "completed"},
                                {"created_at", 10},
                                {"usage", {{"input_tokens", 7}, {"output_tokens", 3}}}}})));
  http_.Push(Page(json::array({{{"id", "msg_0"},
                                {"type", "message"},
                                {"role", "user"},
                                {"status", "completed"},
                                {"turn_id", "turn_1"}},
                               {{"id", "cmd_1"},
                                {"type", "command_execution"},
                                {"command", "ls"},
                                {"output", "ab\n"},
                                {"exit_code", 0},
                                {"status", "completed"},
                                {"turn_id", "turn_1"}},
                               {{"id", "msg_1"},
                                {"type", "message"},
                                {"role", "assistant"},
                                {"status", "completed"},
                                {"content", {{{"type", "output_text"}, {"text", "done"}}}},
                                {"turn_id", "turn_1"}}})));

  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.StreamEvents("sess_1", &state, seen.Callback());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_FALSE(state.server_ended) << "the read-back's turn end stopped it";
  std::vector<std::string> got;
  for (const AgentEvent& e : seen.events) {
    got.push_back(e.type + (e.raw.value(kAgentsReadBackField, false) ? "+" : "") + " " + e.item_id +
                  e.event_id);
  }
  EXPECT_THAT(
      got,
      ElementsAre("agent.session.turn.created e1", "agent.session.turn.item.added cmd_1e2",
                  "agent.output.command_execution_output.delta cmd_1e3",
                  "agent.session.turn.item.done+ cmd_1", "agent.session.turn.item.added+ msg_1",
                  "agent.session.turn.item.done+ msg_1", "agent.session.turn.completed+ "));
  EXPECT_EQ(seen.events[3].item->command->output, "ab\n");
  EXPECT_EQ(seen.events[3].item->command->exit_code, 0);
  EXPECT_EQ(seen.events[3].turn_id, "turn_1");
  EXPECT_EQ(seen.events[5].item->text, "done");
  ASSERT_TRUE(seen.events[6].usage.has_value());
  EXPECT_EQ(seen.events[6].usage->total_tokens, 10);
  EXPECT_EQ(http_.pending(), 0u);
}

// A server that replays: a command that ran across the break has its later deltas dropped (the
// replay repeats some; a live server would have lost some) and is done once, from its item; an
// item or a turn end said by both the read-back and the replay is delivered once.
TEST_F(AgentsClientTest, ACommandRunningAcrossABreakIsDoneOnceWithoutItsLaterDeltas) {
  const json cmd = {{"type", "command_execution"}, {"id", "cmd_1"}, {"command", "ls"}};
  const std::string added = Frame(Event("agent.session.turn.item.added", "e1",
                                        {{"item", With(cmd, {{"status", "in_progress"}})}}));
  const std::string d1 = Frame(Event("agent.output.command_execution_output.delta", "e2",
                                     {{"item_id", "cmd_1"}, {"delta", "a"}}));
  const std::string d2 = Frame(Event("agent.output.command_execution_output.delta", "e3",
                                     {{"item_id", "cmd_1"}, {"delta", "b"}}));
  const json done_item = With(cmd, {{"status", "completed"}, {"output", "abc"}, {"exit_code", 0}});
  const std::string done =
      Frame(Event("agent.session.turn.item.done", "e4", {{"item", done_item}}));
  ScriptedReply broken = ScriptedReply::Stream({added, d1});
  broken.error = absl::UnavailableError("connection reset by peer");
  http_.Push(broken);
  http_.Push(ScriptedReply::Stream({added, d1, d2, done, TurnCompleted("e5")}));
  http_.Push(Page(json::array({{{"id", "turn_1"}, {"status", "in_progress"}}})));
  http_.Push(Page(json::array({With(cmd, {{"status", "in_progress"}, {"output", "ab"}})})));

  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.StreamEvents("sess_1", &state, seen.Callback());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen.ids(), ElementsAre("e1", "e2", "e4", "e5"));
  EXPECT_EQ(seen.events[2].item->command->output, "abc");
  EXPECT_TRUE(state.items_gapped.empty());
}

TEST_F(AgentsClientTest, AReadBackThatFailsEndsTheStreamSayingSo) {
  ScriptedReply broken = ScriptedReply::Stream({Frame(Event("agent.session.turn.created", "e1"))});
  broken.error = absl::UnavailableError("connection reset by peer");
  http_.Push(broken);
  http_.Push(ScriptedReply::Stream({TurnCompleted("e2")}));
  http_.Push(ScriptedReply::Json(404, {{"error", {{"message", "No session sess_1"}}}}));
  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.StreamEvents("sess_1", &state, seen.Callback());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("reading back what session sess_1 did while its event "
                                     "stream was down"));
  EXPECT_THAT(seen.ids(), ElementsAre("e1"));
}

TEST_F(AgentsClientTest, HttpErrorsAndCallbackErrorsOnAStreamAreNotResumed) {
  http_.Push(ScriptedReply::Json(404, {{"error", {{"message", "No session sess_1"}}}}));
  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client_.StreamEvents("sess_1", &state, seen.Callback());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(IsBrokenStream(s));
  EXPECT_EQ(http_.requests().size(), 1u);

  http_.Push(ScriptedReply::Stream({Frame(Event("agent.session.turn.created", "e1")),
                                    Frame(Event("agent.session.turn.created", "e2"))}));
  int calls = 0;
  s = client_.StreamEvents("sess_1", &state, [&](const AgentEvent&, bool*) {
    ++calls;
    return absl::FailedPreconditionError("the run was cancelled");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(http_.requests().size(), 2u);
}

TEST_F(AgentsClientTest, ArtifactsArePagedAndTheirContentIsCapped) {
  http_.Push(ScriptedReply::Json(200, json::parse(R"({"object":"list","data":[
      {"id":"art_1","object":"agent.session.artifact","path":"/workspace/outputs/memo.md",
       "size_bytes":20,"created_at":5,"environment_id":"env_1","session_id":"sess_1",
       "turn_id":"turn_1"}],"last_id":"art_1","has_more":true})")));
  http_.Push(ScriptedReply::Json(
      200, json::parse(R"({"data":[{"id":"art_2","path":"/workspace/outputs/chart.png"}],
      "has_more":false})")));
  absl::StatusOr<std::vector<AgentArtifact>> all = client_.ListAllArtifacts("sess_1");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].path, "/workspace/outputs/memo.md");
  EXPECT_EQ((*all)[0].size_bytes, 20);
  EXPECT_EQ((*all)[0].turn_id, "turn_1");
  EXPECT_EQ((*all)[1].id, "art_2");
  std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  const std::string base = std::string(kBase) + "/agents/sessions/sess_1/artifacts";
  EXPECT_EQ(reqs[0].url, base + "?limit=100");
  EXPECT_EQ(reqs[1].url, base + "?after=art_1&limit=100");

  http_.Push(ScriptedReply::Json(200, {{"data", json::array()}, {"has_more", false}}));
  AgentArtifactListParams params;
  params.environment_id = "env_1";
  params.after = "art_1";
  params.limit = 10;
  params.order = "asc";
  ASSERT_TRUE(client_.ListArtifacts("sess_1", params).ok());
  EXPECT_EQ(http_.requests().back().url,
            base + "?environment_id=env_1&after=art_1&limit=10&order=asc");

  http_.Push(ScriptedReply::Stream({"# Memo", "\nok\n"}));
  absl::StatusOr<std::string> memo = client_.ArtifactContent("sess_1", "art_1", 10);
  ASSERT_TRUE(memo.ok()) << memo.status();
  EXPECT_EQ(*memo, "# Memo\nok\n");
  http_.Push(ScriptedReply::Stream({"# Memo", "\nok\n", "more"}));
  absl::Status big = client_.ArtifactContent("sess_1", "art_1", 10).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.message(), HasSubstr("artifact art_1 is larger than 10 bytes"));
}

TEST_F(AgentsClientTest, SessionsArePagedWithTheirMetadata) {
  json first = SessionObject("idle");
  first["metadata"] = {{"sandgate_session", "s-1"}, {"count", 3}};
  http_.Push(ScriptedReply::Json(
      200, {{"object", "list"}, {"data", {first}}, {"last_id", "sess_1"}, {"has_more", true}}));
  http_.Push(ScriptedReply::Json(
      200, json::parse(R"({"data":[{"id":"sess_2","status":"in_progress"}],"has_more":false})")));
  absl::StatusOr<std::vector<AgentSession>> all = client_.ListAllSessions();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, "sess_1");
  EXPECT_EQ((*all)[0].metadata, (std::map<std::string, std::string>{{"sandgate_session", "s-1"}}))
      << "a value that is not a string is skipped";
  EXPECT_EQ((*all)[1].id, "sess_2");
  EXPECT_EQ((*all)[1].status, AgentSessionStatus::kInProgress);
  EXPECT_TRUE((*all)[1].metadata.empty());
  std::vector<RecordedRequest> reqs = http_.requests();
  ASSERT_EQ(reqs.size(), 2u);
  const std::string base = std::string(kBase) + "/agents/sessions";
  EXPECT_EQ(reqs[0].url, base + "?limit=100");
  EXPECT_EQ(reqs[1].url, base + "?after=sess_1&limit=100");

  http_.Push(
      ScriptedReply::Json(200, json::parse(R"({"data":[{"id":"sess_3"}],"has_more":true})")));
  AgentSessionListParams params;
  params.after = "sess_2";
  params.limit = 1;
  params.order = "asc";
  absl::StatusOr<AgentSessionPage> page = client_.ListSessions(params);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(http_.requests().back().url, base + "?after=sess_2&limit=1&order=asc");
  EXPECT_TRUE(page->has_more);
  EXPECT_EQ(page->last_id, "sess_3") << "the last element's id when the page names none";

  http_.Push(ScriptedReply::Json(200, json::parse(R"({"data":[{"status":"idle"}]})")));
  EXPECT_EQ(client_.ListSessions().status().code(), absl::StatusCode::kInternal)
      << "a session without an id";
}

TEST_F(AgentsClientTest, TurnsItemsAndEnvironmentsAreParsed) {
  http_.Push(ScriptedReply::Json(200, json::parse(R"({"data":[
      {"id":"turn_1","object":"agent.session.turn","status":"completed","created_at":1,
       "started_at":2,"completed_at":3,"usage":{"input_tokens":5,"output_tokens":6,
       "total_tokens":11,"output_tokens_details":{"reasoning_tokens":4}},"error":null},
      {"id":"turn_2","status":"failed","error":{"message":"setup command failed"}}],
      "has_more":false})")));
  absl::StatusOr<std::vector<AgentTurn>> turns = client_.ListTurns("sess_1");
  ASSERT_TRUE(turns.ok()) << turns.status();
  ASSERT_EQ(turns->size(), 2u);
  EXPECT_EQ((*turns)[0].status, AgentTurnStatus::kCompleted);
  EXPECT_EQ((*turns)[0].completed_at, 3);
  EXPECT_EQ((*turns)[0].usage->reasoning_tokens, 4);
  EXPECT_TRUE((*turns)[0].error.is_null());
  EXPECT_EQ((*turns)[1].error["message"], "setup command failed");

  http_.Push(ScriptedReply::Json(200, json::parse(R"({"data":[
      {"id":"msg_0","type":"message","role":"user","turn_id":"turn_1",
       "content":[{"type":"input_text","text":"$ ls"}]},
      {"id":"item_1","type":"command_execution","command":"ls","exit_code":2,"turn_id":"turn_1",
       "output":"ls: cannot access"}],"has_more":false})")));
  absl::StatusOr<std::vector<AgentItem>> items = client_.ListItems("sess_1");
  ASSERT_TRUE(items.ok()) << items.status();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_EQ((*items)[0].role, "user");
  EXPECT_EQ((*items)[1].command->exit_code, 2);
  EXPECT_EQ(http_.requests().back().url,
            std::string(kBase) + "/agents/sessions/sess_1/items?order=asc&limit=100");

  http_.Push(ScriptedReply::Json(
      200, {{"id", "env_1"}, {"type", "openai_hosted"}, {"status", "suspended"}}));
  absl::StatusOr<AgentEnvironment> env = client_.GetEnvironment("env_1");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->status, AgentEnvironmentStatus::kSuspended);
  http_.Push(ScriptedReply::Json(200, {{"status", "connected"}}));
  EXPECT_EQ(client_.GetEnvironment("env_1").status().code(), absl::StatusCode::kInternal);
  // Ids cannot leave their path segment.
  http_.Push(ScriptedReply::Json(200, {{"id", "turn_1"}}));
  ASSERT_TRUE(client_.GetTurn("../x", "a/b").ok());
  EXPECT_EQ(http_.requests().back().url,
            std::string(kBase) + "/agents/sessions/..%2Fx/turns/a%2Fb");
}

// Over a real socket: a connection closed in the middle of a chunked body is what libcurl
// reports as a broken stream, and the client resumes on a new connection.
TEST(AgentsClientOverCurlTest, AConnectionDroppedMidStreamIsResumedWithoutDuplicates) {
  const std::string e1 = Frame(Event("agent.session.turn.created", "e1"), "1");
  const std::string e2 = Frame(Event("agent.session.turn.completed", "e2",
                                     {{"turn", {{"id", "turn_1"}, {"status", "completed"}}}}),
                               "2");
  std::atomic<int> connections{0};
  LoopbackHttpServer server([&](const ReceivedRequest& request, int fd, int) {
    if (!absl::StrContains(request.target, "/events")) {  // the read-back: nothing in the gap
      LoopbackHttpServer::WriteAll(
          fd, LoopbackHttpServer::Response(200, R"({"object":"list","data":[],"has_more":false})",
                                           {{"Content-Type", "application/json"}}));
      return;
    }
    LoopbackHttpServer::WriteAll(fd,
                                 "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Chunk(e1));
    if (connections.fetch_add(1) == 0) {
      // Half of the next chunk, then the connection closes without the chunked terminator.
      LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Chunk(e2).substr(0, 20));
      return;
    }
    LoopbackHttpServer::WriteAll(fd, LoopbackHttpServer::Chunk(e2));
    LoopbackHttpServer::WriteAll(fd, "0\r\n\r\n");
  });
  CurlHttpClient curl;
  FakeCredentials creds(kKey);
  AgentsClient client(&curl, &creds, server.Url("/v1"));
  AgentEventStreamState state;
  Collector seen;
  absl::Status s = client.StreamEvents("sess_1", &state, seen.Callback());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen.ids(), ElementsAre("e1", "e2"));
  EXPECT_EQ(state.reconnects, 1);
  const std::vector<ReceivedRequest> got = server.requests();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[1].target, "/v1/agents/sessions/sess_1/events");
  // The read-back runs once the new stream is answered, before its events are read.
  EXPECT_EQ(got[2].target, "/v1/agents/sessions/sess_1/turns?limit=100");
  EXPECT_EQ(got[3].target, "/v1/agents/sessions/sess_1/items?order=asc&limit=100");
  EXPECT_EQ(state.read_backs, 1);
  EXPECT_EQ(got[1].headers.Get("last-event-id"), "1");
  EXPECT_EQ(got[1].headers.Get("openai-beta"), "agents=v1");
}

}  // namespace
}  // namespace sandgate::upstream
