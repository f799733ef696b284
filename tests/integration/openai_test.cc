// The real daemon with the openai provider and the openai/chat agents, against the fake OpenAI
// server: the three paths end with verified financial-analyst artifacts; faults are retried
// or end in a clear FAILED; the fake holds no container and no file after every test, also
// after a SIGKILLed daemon is restarted; the API key shows up nowhere.
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "tests/integration/daemon_harness.h"
#include "tests/sandbox/openai/analyst_scenario.h"
#include "upstream/retry.h"

namespace sandgate::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kApiKey[] = "sk-it-SECRET-5f1d9a7c3e2b4d6f8a0c1e3b5d7f9a2c";
constexpr char kInput[] = "northstar_cloud_financial_statements.csv";

// How many times the fake was asked `method path`.
int Attempts(FakeOpenAiServer& fake, const std::string& method, const std::string& path) {
  int n = 0;
  const nlohmann::json state = fake.State();
  for (const auto& r : state["requests"]) {
    n += r.value("method", "") == method && r.value("path", "") == path ? 1 : 0;
  }
  return n;
}

// A first hosted command that counts how often it ran (its output is that count), then the
// analyst's turns.
nlohmann::json RanOnceThenAnalystTurns() {
  nlohmann::json turns = AnalystTurns(kInput);
  nlohmann::json first = nlohmann::json::object();
  first["shell"] = nlohmann::json::array({"echo ran >> ran.txt; wc -l < ran.txt"});
  turns.insert(turns.begin(), first);
  return turns;
}

class OpenAiIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start());
    ASSERT_TRUE(key_dir_.ok());
    key_file_ = WriteKeyFile(key_dir_.path(), kApiKey);
    nlohmann::json upstream = {{"base_url", fake_.base_url()}, {"api_key_file", key_file_}};
    nlohmann::json openai = upstream, chat = upstream;
    openai["model"] = "fake-model";
    openai["max_turns"] = 10;
    chat["model"] = "fake-chat-model";
    daemon_ = std::make_unique<DaemonHarness>(
        nlohmann::json{{"local", {{"uid_base", 310000}, {"uid_count", 64}}},
                       {"openai", openai},
                       {"chat", chat},
                       {"metrics_listen", "127.0.0.1:0"}});
    daemon_->Start();
    stub_ = daemon_->Stub();
  }

  void TearDown() override {
    daemon_->Stop(SIGTERM);
    // Nothing may be left upstream.
    nlohmann::json state = fake_.State();
    EXPECT_TRUE(state["containers"].empty()) << state.dump();
    EXPECT_TRUE(state["files"].empty()) << state.dump();
  }

  v1::RunAnalysisRequest Request(const std::string& provider, const std::string& agent) {
    v1::RunAnalysisRequest req = SampleRequest();
    req.set_provider(provider);
    req.set_agent(agent);
    return req;
  }

  std::string Start(const v1::RunAnalysisRequest& req) {
    auto ctx = DaemonHarness::Context();
    v1::Run run;
    grpc::Status st = stub_->RunAnalysis(ctx.get(), req, &run);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return run.id();
  }

  // Runs to the end; returns the final run record, and the events in *events.
  v1::Run RunToEnd(const v1::RunAnalysisRequest& req, std::vector<v1::Event>* events = nullptr,
                   const std::function<void(const v1::Event&)>& on_event = nullptr) {
    const std::string id = Start(req);
    std::vector<v1::Event> ev = FollowToEnd(*stub_, id, "", 0, on_event);
    v1::GetRunRequest get;
    get.set_run_id(id);
    v1::Run run;
    auto ctx = DaemonHarness::Context();
    EXPECT_TRUE(stub_->GetRun(ctx.get(), get, &run).ok());
    if (events != nullptr) *events = std::move(ev);
    return run;
  }

  std::string Download(const v1::Run& run, const std::string& name) {
    DownloadedArtifact d = DownloadArtifact(*stub_, run.id(), name);
    EXPECT_TRUE(d.status.ok()) << name << ": " << d.status.error_message();
    return d.data;
  }

  // Succeeded with all six artifacts and every check passed.
  void ExpectVerified(const v1::Run& run, const std::vector<v1::Event>& events) {
    EXPECT_EQ(run.status(), v1::RUN_STATUS_SUCCEEDED) << run.status_reason() << "\n"
                                                      << daemon_->Log();
    EXPECT_EQ(run.artifacts_size(), 6);
    EXPECT_GT(run.checks_size(), 0);
    for (const auto& c : run.checks()) EXPECT_TRUE(c.passed()) << c.name() << ": " << c.detail();
    EXPECT_GE(CountEvents(events, "command.started"), 2);
    EXPECT_EQ(CountEvents(events, "command.started"), CountEvents(events, "command.finished"));
    EXPECT_GE(CountEvents(events, "token_usage"), 1);
    EXPECT_GE(CountEvents(events, "agent_message"), 1);
  }

  FakeOpenAiServer fake_{kApiKey};
  ScopedTempDir key_dir_{"sg-key"};
  std::string key_file_;
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
};

TEST_F(OpenAiIntegrationTest, OpenAiAgentOnHostedContainerVerifies) {
  fake_.Scenario(AnalystTurns(kInput));
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("openai", "openai"), &events);
  ExpectVerified(run, events);
  bool mapped = false;
  for (const auto& e : events) {
    if (e.type() != "session.created") continue;
    EXPECT_EQ(e.session_created().provider(), "openai");
    for (const auto& w : e.session_created().unenforced()) mapped |= absl::StrContains(w, "1g");
  }
  EXPECT_TRUE(mapped);
}

TEST_F(OpenAiIntegrationTest, OpenAiAgentOnLocalSessionVerifies) {
  fake_.Scenario(AnalystTurns(kInput));
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("local", "openai"), &events);
  ExpectVerified(run, events);
}

TEST_F(OpenAiIntegrationTest, ChatAgentOnLocalSessionVerifies) {
  fake_.Scenario(AnalystTurns(kInput));
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("local", "chat"), &events);
  ExpectVerified(run, events);
}

TEST_F(OpenAiIntegrationTest, FaultsAreRetried) {
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/containers"},
               {"method", "POST"},
               {"status", 429},
               {"retry_after", "1"}});
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"status", 500}});
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"delay_ms", 2000}});
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"drop_mid_stream", true}, {"after_frames", 10}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("openai", "openai"), &events);
  ExpectVerified(run, events);
  bool retried = false;
  for (const auto& e : events) {
    retried |= e.type() == "notice" && absl::StrContains(e.notice().message(), "stream broke");
  }
  EXPECT_TRUE(retried);
  // Each failed HTTP attempt is counted where it happened (labels in name order).
  std::string page = daemon_->Metrics();
  for (const char* line : {"sandgate_upstream_errors_total{endpoint=\"containers\",kind=\"429\","
                           "retried=\"true\",upstream=\"openai\"} 1",
                           "sandgate_upstream_errors_total{endpoint=\"responses\",kind=\"500\","
                           "retried=\"true\",upstream=\"openai\"} 1"}) {
    EXPECT_TRUE(absl::StrContains(page, line)) << "no '" << line << "' in\n" << page;
  }
}

// Issue 10 item 3: the hosted stream drops after a command has run. The response is picked up
// where it broke (it was created in the background), never created again: every command runs
// once, each response's tokens count once, and the run's events say the stream was resumed.
TEST_F(OpenAiIntegrationTest, ADroppedHostedStreamIsResumedAndRunsNoCommandTwice) {
  fake_.Scenario(RanOnceThenAnalystTurns());
  // Frame 11 is the first command's output done: it has run.
  fake_.Fault({{"path_prefix", "/v1/responses"},
               {"method", "POST"},
               {"drop_mid_stream", true},
               {"after_frames", 11}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("openai", "openai"), &events);
  ExpectVerified(run, events);
  EXPECT_EQ(CountEvents(events, "command.started"), 3);  // one, then the analyst's two
  std::string ran;
  bool resumed = false;
  for (const auto& e : events) {
    if (e.type() == "command.output" && e.command_output().command_id() == 1) {
      ran += e.command_output().data();
    }
    resumed |=
        e.type() == "notice" && absl::StrContains(e.notice().message(), "resuming response resp_");
  }
  EXPECT_EQ(ran, "1\n") << "the first command ran more than once";
  EXPECT_TRUE(resumed);
  // The hosted response runs both shell calls and ends with the message: it is sent once.
  EXPECT_EQ(Attempts(fake_, "POST", "/v1/responses"), 1);
  EXPECT_EQ(CountEvents(events, "token_usage"), 1);
}

// When the stream cannot be picked up again, the turn fails saying so instead of being sent
// again, and the response left running upstream is cancelled.
TEST_F(OpenAiIntegrationTest, AHostedStreamThatCannotBeResumedFailsWithoutResending) {
  fake_.Scenario(RanOnceThenAnalystTurns());
  fake_.Fault({{"path_prefix", "/v1/responses"},
               {"method", "POST"},
               {"drop_mid_stream", true},
               {"after_frames", 11}});
  fake_.Fault({{"path_prefix", "/v1/responses/"},
               {"method", "GET"},
               {"drop_mid_stream", true},
               {"after_frames", 0},
               {"times", 10}});
  v1::Run run = RunToEnd(Request("openai", "openai"));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(),
              HasSubstr("stream broke after its hosted commands may have run"));
  EXPECT_THAT(run.status_reason(), HasSubstr("not sent again"));
  EXPECT_EQ(Attempts(fake_, "POST", "/v1/responses"), 1);
  bool cancelled = false;
  const nlohmann::json state = fake_.State();
  for (const auto& r : state["requests"]) {
    cancelled |= r.value("method", "") == "POST" && absl::EndsWith(r.value("path", ""), "/cancel");
  }
  EXPECT_TRUE(cancelled) << state["requests"].dump();
}

// The chat agent runs the model's tool calls itself once a completion has ended, so a broken
// completion stream ran nothing and is sent again; no command runs twice for it.
TEST_F(OpenAiIntegrationTest, ChatFaultsAreRetried) {
  fake_.Scenario(RanOnceThenAnalystTurns());
  fake_.Fault({{"path_prefix", "/v1/chat/completions"}, {"status", 429}, {"retry_after", "1"}});
  fake_.Fault({{"path_prefix", "/v1/chat/completions"}, {"status", 503}});
  fake_.Fault(
      {{"path_prefix", "/v1/chat/completions"}, {"drop_mid_stream", true}, {"after_frames", 4}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("local", "chat"), &events);
  ExpectVerified(run, events);
  EXPECT_EQ(CountEvents(events, "command.started"), 3);
  std::string ran;
  for (const auto& e : events) {
    if (e.type() == "command.output" && e.command_output().command_id() == 1) {
      ran += e.command_output().data();
    }
  }
  EXPECT_EQ(ran, "1\n");
}

TEST_F(OpenAiIntegrationTest, PersistentServerErrorsFailClearly) {
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"status", 500}, {"times", 20}});
  v1::Run run = RunToEnd(Request("openai", "openai"));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("the OpenAI Responses API"));
  EXPECT_THAT(run.status_reason(), HasSubstr("500"));
}

TEST_F(OpenAiIntegrationTest, ModelFailureAndTurnLimitFailClearly) {
  fake_.Scenario({{{"fail", {{"code", "server_error"}, {"message", "model exploded"}}}}});
  v1::Run run = RunToEnd(Request("local", "openai"));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(run.status_reason(), "the model's response failed: server_error: model exploded");

  nlohmann::json turns = nlohmann::json::array();
  for (int i = 0; i < 5; ++i) turns.push_back({{"shell", {"true"}}});
  fake_.Scenario(turns);
  v1::RunAnalysisRequest req = Request("local", "chat");
  req.set_max_turns(3);
  run = RunToEnd(req);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(run.status_reason(), "the model did not finish within 3 turns");
}

TEST_F(OpenAiIntegrationTest, AnExpiredContainerFailsTheRunClearly) {
  fake_.Scenario(AnalystTurns(kInput));
  // Hold the model's first request while the container's idle time runs out.
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"delay_ms", 3000}});
  std::atomic<bool> advanced{false};
  v1::Run run = RunToEnd(Request("openai", "openai"), nullptr, [&](const v1::Event& e) {
    if (e.type() == "file.transferred" && !advanced.exchange(true)) fake_.AdvanceClock(21 * 60);
  });
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("container cntr_"));
  EXPECT_THAT(run.status_reason(), HasSubstr("expired"));
}

TEST_F(OpenAiIntegrationTest, WhatHostedContainersCannotDoIsRefusedBeforeAnythingIsMade) {
  fake_.Scenario(AnalystTurns(kInput));
  auto refused = [&](const v1::RunAnalysisRequest& req) {
    v1::Run run;
    return stub_->RunAnalysis(DaemonHarness::Context().get(), req, &run);
  };
  v1::RunAnalysisRequest setup = Request("openai", "openai");
  setup.mutable_sandbox()->add_setup_commands("pip install pandas");
  grpc::Status st = refused(setup);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("sandbox.setup_commands: the 'openai' provider runs "
                                            "commands only through the openai agent"));
  for (const char* agent : {"reference", "chat"}) {
    st = refused(Request("openai", agent));
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << agent;
    EXPECT_THAT(st.error_message(),
                HasSubstr(std::string("agent: '") + agent + "' runs its commands in the sandbox"));
  }
  v1::CreateSessionRequest session;
  session.set_provider("openai");
  session.mutable_sandbox()->add_setup_commands("true");
  v1::Session s;
  st = stub_->CreateSession(DaemonHarness::Context().get(), session, &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("sandbox.setup_commands"));
  EXPECT_TRUE(fake_.State()["containers"].empty()) << "nothing was made upstream";

  // A run in a kept hosted session takes the session's provider, and is checked against it.
  session.mutable_sandbox()->clear_setup_commands();
  ASSERT_TRUE(stub_->CreateSession(DaemonHarness::Context().get(), session, &s).ok());
  v1::RunAnalysisRequest in_session = Request("", "reference");
  in_session.set_session_id(s.id());
  st = refused(in_session);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(),
              HasSubstr("the 'openai' provider runs commands only through the openai agent"));
  in_session.set_provider("local");
  st = refused(in_session);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(st.error_message(), HasSubstr("provider: 'local' is not session"));
  in_session.clear_provider();
  in_session.set_agent("openai");
  v1::Run ok = RunToEnd(in_session);
  EXPECT_EQ(ok.status(), v1::RUN_STATUS_SUCCEEDED) << ok.status_reason();
  EXPECT_EQ(ok.provider(), "openai");
  v1::CloseSessionRequest close;
  close.set_session_id(s.id());
  EXPECT_TRUE(stub_->CloseSession(DaemonHarness::Context().get(), close, &s).ok());
}

TEST_F(OpenAiIntegrationTest, ASigkilledDaemonsContainerIsSweptOnRestart) {
  fake_.Scenario({{{"shell", {"sleep 30"}}, {"timeout_ms", 60000}}, {{"message", "done"}}});
  const std::string id = Start(Request("openai", "openai"));
  // Wait for the hosted command to start, then kill the daemon.
  auto ctx = DaemonHarness::Context();
  v1::StreamEventsRequest req;
  req.set_run_id(id);
  req.set_follow(true);
  auto reader = stub_->StreamEvents(ctx.get(), req);
  v1::Event e;
  bool started = false;
  while (!started && reader->Read(&e)) started = e.type() == "command.started";
  ASSERT_TRUE(started);
  daemon_->Stop(SIGKILL);
  ctx->TryCancel();
  reader->Finish();
  ASSERT_EQ(fake_.State()["containers"].size(), 1u);

  daemon_->Start();
  stub_ = daemon_->Stub();
  for (int i = 0; i < 100 && !fake_.State()["containers"].empty(); ++i) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(fake_.State()["containers"].empty());
  v1::GetRunRequest get;
  get.set_run_id(id);
  v1::Run run;
  auto gctx = DaemonHarness::Context();
  ASSERT_TRUE(stub_->GetRun(gctx.get(), get, &run).ok());
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
}

TEST_F(OpenAiIntegrationTest, TheApiKeyIsNowhere) {
  std::string everything;
  auto take = [&](const std::vector<v1::Event>& events) {
    for (const auto& e : events) everything += e.DebugString() + e.SerializeAsString();
  };
  // The sandbox's environment, as the chat agent's commands see it.
  fake_.Scenario({{{"shell",
                    {"env", "cat /proc/self/environ | tr '\\0' '\\n'",
                     "cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; true"}}},
                  {{"message", "that is the environment"}}});
  std::vector<v1::Event> events;
  RunToEnd(Request("local", "chat"), &events);
  std::string env_output;
  for (const auto& e : events) {
    if (e.type() == "command.output") env_output += e.command_output().data();
  }
  EXPECT_THAT(env_output, HasSubstr("PATH="));  // the commands did run
  take(events);

  // All three paths, with their artifacts.
  for (const auto& [provider, agent] : std::vector<std::pair<std::string, std::string>>{
           {"openai", "openai"}, {"local", "openai"}, {"local", "chat"}}) {
    fake_.Scenario(AnalystTurns(kInput));
    v1::Run run = RunToEnd(Request(provider, agent), &events);
    EXPECT_EQ(run.status(), v1::RUN_STATUS_SUCCEEDED)
        << provider << "/" << agent << ": " << run.status_reason();
    take(events);
    everything += run.DebugString();
    for (const auto& a : run.artifacts()) everything += Download(run, a.name());
  }
  // A failing upstream call too: its error message must not carry the key either.
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"status", 500}, {"times", 20}});
  v1::Run failed = RunToEnd(Request("local", "openai"), &events);
  take(events);
  everything += failed.DebugString();

  EXPECT_FALSE(absl::StrContains(everything, kApiKey));
  EXPECT_FALSE(absl::StrContains(env_output, kApiKey));
  const std::string log = daemon_->Log();
  EXPECT_GT(log.size(), 0u);
  EXPECT_FALSE(absl::StrContains(log, kApiKey));
  // Nor in anything the daemon stored (SQLite state, artifacts).
  std::string grep = absl::StrCat("grep -rqa -- '", kApiKey, "' ", daemon_->state_dir());
  EXPECT_NE(std::system(grep.c_str()), 0) << "the key is in " << daemon_->state_dir();
}

// Issue 10 item 6: the container is reported expired once the model's turn is over (here
// 0.x s after it was made); the run fails saying what the API said, when and for which
// container, not "artifact … is missing" and not "idle longer than 20 minutes".
TEST_F(OpenAiIntegrationTest, AnExpiryAfterTheTurnIsReportedAsTheApiSaidIt) {
  fake_.Scenario(AnalystTurns(kInput));
  // Only collecting the artifacts reads container files on the hosted path.
  fake_.Fault({{"path_prefix", "/v1/containers/"},
               {"method", "GET"},
               {"status", 400},
               {"message", "Container is expired."},
               {"times", 100}});
  v1::Run run = RunToEnd(Request("openai", "openai"));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("container cntr_"));
  EXPECT_THAT(run.status_reason(), HasSubstr("the API said: "));
  EXPECT_THAT(run.status_reason(), HasSubstr("Container is expired."));
  EXPECT_THAT(run.status_reason(), Not(HasSubstr("is missing")));
  EXPECT_THAT(run.status_reason(), Not(HasSubstr("idle")));
}

// Issue 10 item 1: POST /containers times out on our side, upstream makes the container
// anyway after we gave up, and the daemon is restarted in between; the container must still
// be found (by its name) and deleted.
TEST_F(OpenAiIntegrationTest, AContainerMadeAfterTheCreateTimedOutIsDeletedAcrossARestart) {
  daemon_->Stop(SIGTERM);
  nlohmann::json openai = {{"base_url", fake_.base_url()},
                           {"api_key_file", key_file_},
                           {"model", "fake-model"},
                           {"request_timeout_seconds", 1}};
  daemon_ = std::make_unique<DaemonHarness>(
      nlohmann::json{{"local", {{"uid_base", 310000}, {"uid_count", 64}}}, {"openai", openai}});
  daemon_->Start();
  stub_ = daemon_->Stub();
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/containers"}, {"method", "POST"}, {"delay_ms", 2500}});
  v1::Run run = RunToEnd(Request("openai", "openai"));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  daemon_->Stop(SIGKILL);  // before the container lands upstream
  daemon_->Start();
  stub_ = daemon_->Stub();
  bool landed = false;
  for (int i = 0; i < 200; ++i) {
    nlohmann::json state = fake_.State();
    for (const auto& r : state["requests"]) {
      landed |= r["method"] == "POST" && r["path"] == "/v1/containers" && r["status"] == 200;
    }
    if (landed && state["containers"].empty()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(landed) << fake_.State().dump();
  EXPECT_TRUE(fake_.State()["containers"].empty()) << fake_.State().dump();
}

// Issue 10 item 4: keeping a held hosted session alive against a server where listing files is
// not activity. The daemon runs with containers that expire after 1 minute (its keeper then
// touches every 15 s).
class HeldHostedSessionTest : public OpenAiIntegrationTest {
 protected:
  void SetUp() override {
    OpenAiIntegrationTest::SetUp();
    daemon_->Stop(SIGTERM);
    nlohmann::json openai = {{"base_url", fake_.base_url()},
                             {"api_key_file", key_file_},
                             {"model", "fake-model"},
                             {"container_expires_after_minutes", 1}};
    daemon_ = std::make_unique<DaemonHarness>(
        nlohmann::json{{"local", {{"uid_base", 310000}, {"uid_count", 64}}}, {"openai", openai}});
    daemon_->Start();
    stub_ = daemon_->Stub();
  }

  v1::Session Create() {
    v1::CreateSessionRequest req;
    req.set_provider("openai");
    v1::Session s;
    grpc::Status st = stub_->CreateSession(DaemonHarness::Context().get(), req, &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s;
  }
  v1::Session Get(const std::string& id) {
    v1::GetSessionRequest req;
    req.set_session_id(id);
    v1::Session s;
    EXPECT_TRUE(stub_->GetSession(DaemonHarness::Context().get(), req, &s).ok());
    return s;
  }
  // The session's own log so far.
  std::vector<v1::Event> SessionEvents(const std::string& id) {
    v1::StreamEventsRequest req;
    req.set_run_id(id);
    auto ctx = DaemonHarness::Context();
    auto reader = stub_->StreamEvents(ctx.get(), req);
    std::vector<v1::Event> events;
    v1::Event e;
    while (reader->Read(&e)) events.push_back(e);
    reader->Finish();
    return events;
  }
  static std::string Notices(const std::vector<v1::Event>& events) {
    std::string out;
    for (const auto& e : events) {
      if (e.type() == "notice") out += e.notice().message() + "\n";
    }
    return out;
  }
  // Waits (real time: the keeper's interval is real) until `done` holds, up to `limit`.
  static bool WaitFor(const std::function<bool()>& done, absl::Duration limit) {
    for (absl::Time end = absl::Now() + limit; absl::Now() < end;) {
      if (done()) return true;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return done();
  }
  // The index, in the fake's request log, of the last request `method path`; -1 if none.
  int LastRequest(const std::string& method, const std::string& path) {
    const nlohmann::json state = fake_.State();
    int last = -1;
    for (size_t i = 0; i < state["requests"].size(); ++i) {
      const auto& r = state["requests"][i];
      if (r.value("method", "") == method && r.value("path", "") == path) last = i;
    }
    return last;
  }
};

// Only command execution counts: the keeper finds its file listing moved nothing, runs `true`
// through the hosted shell, and the container outlives its first minute.
TEST_F(HeldHostedSessionTest, StaysAliveWhenOnlyCommandsCountAsActivity) {
  fake_.Post("/_fake/activity", {{"counts", "commands"}});
  v1::Session s = Create();
  const std::string cid = fake_.State()["containers"][0]["id"];
  // The keeper's first round: a command, then a read of the container to check it.
  ASSERT_TRUE(WaitFor(
      [&] {
        const int ran = LastRequest("POST", "/v1/responses");
        return ran >= 0 && LastRequest("GET", "/v1/containers/" + cid) > ran;
      },
      absl::Seconds(25)))
      << fake_.State()["requests"].dump();
  fake_.AdvanceClock(50);  // 65 s after the create, 50 s after the keeper's command
  EXPECT_EQ(fake_.State()["containers"][0]["status"], "running");
  v1::Session got = Get(s.id());
  EXPECT_EQ(got.status(), v1::SESSION_STATUS_ACTIVE) << got.status_reason();
  EXPECT_EQ(Notices(SessionEvents(s.id())), "");
  v1::CloseSessionRequest close;
  close.set_session_id(s.id());
  EXPECT_TRUE(stub_->CloseSession(DaemonHarness::Context().get(), close, &got).ok());
}

// Nothing counts: the session's log says the daemon cannot keep the container alive and
// expires_at is when the container really expires; once it has expired, GetSession says
// SESSION_EXPIRED at once (not ACTIVE after the daemon logged the expiry).
TEST_F(HeldHostedSessionTest, AnExpiryItCannotPreventIsReportedAtOnce) {
  fake_.Post("/_fake/activity", {{"counts", "none"}});
  v1::Session s = Create();
  const int64_t last_active = fake_.State()["containers"][0]["last_active_at"];
  std::string notices;
  ASSERT_TRUE(WaitFor(
      [&] {
        notices = Notices(SessionEvents(s.id()));
        return !notices.empty();
      },
      absl::Seconds(25)));
  EXPECT_THAT(notices, HasSubstr("cannot keep container cntr_"));
  v1::Session got = Get(s.id());
  EXPECT_EQ(got.status(), v1::SESSION_STATUS_ACTIVE);
  EXPECT_EQ(got.expires_at().seconds(), last_active + 60);

  fake_.AdvanceClock(61);
  ASSERT_TRUE(
      WaitFor([&] { return absl::StrContains(daemon_->Log(), "sandbox.openai_container_expired"); },
              absl::Seconds(25)));
  got = Get(s.id());
  EXPECT_EQ(got.status(), v1::SESSION_STATUS_EXPIRED);
  EXPECT_THAT(got.status_reason(), HasSubstr("expired"));
}

// A container create whose first attempt landed upstream although its answer was lost (the
// connection broke after the container was made), then was retried and succeeded: the first
// attempt's container has the session's name too and must not be left behind.
TEST_F(OpenAiIntegrationTest, AnEarlierAttemptOfARetriedCreateLeavesNoContainer) {
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/containers"},
               {"method", "POST"},
               {"drop_connection", true},
               {"after_handling", true}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("openai", "openai"), &events);
  ExpectVerified(run, events);
  EXPECT_EQ(Attempts(fake_, "POST", "/v1/containers"), 2);
  EXPECT_TRUE(fake_.State()["containers"].empty()) << fake_.State().dump();
}

// An input the verifier would fail whatever the agent does (a missing column, a cell that is
// not a number, a duplicate year) is refused at RunAnalysis, naming the problem: no model call,
// no container, nothing paid for (issue 10, item 7).
TEST_F(OpenAiIntegrationTest, AFatalInputIsRefusedBeforeAnyModelCall) {
  fake_.Scenario(AnalystTurns(kInput));
  struct Case {
    const char* file;
    const char* problem;
  };
  for (const Case& c : {Case{"missing_column.csv", "missing required column(s): interest_expense"},
                        Case{"non_numeric_cell.csv", "not a finite number"},
                        Case{"duplicate_year.csv", "duplicate year 2023"}}) {
    for (const char* provider : {"openai", "local"}) {
      v1::RunAnalysisRequest req = Request(provider, "openai");
      std::ifstream in(std::string(SANDGATE_SOURCE_DIR) + "/tests/data/financial/" + c.file);
      req.mutable_inputs(0)->set_name(c.file);
      req.mutable_inputs(0)->set_content(std::string(std::istreambuf_iterator<char>(in), {}));
      v1::Run run;
      grpc::Status st = stub_->RunAnalysis(DaemonHarness::Context().get(), req, &run);
      EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.file << " " << provider;
      EXPECT_THAT(st.error_message(), HasSubstr(std::string("inputs: input \"") + c.file + "\": "));
      EXPECT_THAT(st.error_message(), HasSubstr(c.problem));
    }
  }
  int paid_calls = 0;                          // model calls and containers
  const nlohmann::json state = fake_.State();  // outlives the loop over its requests
  for (const auto& r : state["requests"]) {
    const std::string path = r["path"].get<std::string>();
    paid_calls += absl::StrContains(path, "/responses") || absl::StrContains(path, "/containers");
  }
  EXPECT_EQ(paid_calls, 0) << state["requests"].dump();
}

// Issue 10 item 2: one policy decides how often a call is tried (the HTTP layer's, obeying the
// server's headers); the agent does not multiply it by retrying the whole turn, and the reason
// says what the server answered rather than that a stream broke.
TEST_F(OpenAiIntegrationTest, APersistentServerErrorIsTriedOnlyAsTheOnePolicyAllows) {
  const int max_attempts = upstream::RetryOptions{}.max_retries + 1;
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/responses"}, {"status", 500}, {"times", 20}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("openai", "openai"), &events);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(Attempts(fake_, "POST", "/v1/responses"), max_attempts);
  EXPECT_THAT(run.status_reason(), HasSubstr("POST /responses: HTTP 500"));
  EXPECT_THAT(run.status_reason(), HasSubstr("request id: req_"));
  for (const auto& e : events) {
    EXPECT_FALSE(e.type() == "notice" && absl::StrContains(e.notice().message(), "broke"))
        << e.notice().message();
  }

  fake_.Post("/_fake/reset", nlohmann::json::object());
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/chat/completions"}, {"status", 500}, {"times", 20}});
  run = RunToEnd(Request("local", "chat"));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(Attempts(fake_, "POST", "/v1/chat/completions"), max_attempts);
  EXPECT_THAT(run.status_reason(), HasSubstr("POST /chat/completions: HTTP 500"));
}

TEST_F(OpenAiIntegrationTest, XShouldRetryFalseOnResponsesIsOneAttempt) {
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/responses"},
               {"status", 500},
               {"x_should_retry", false},
               {"times", 20}});
  v1::Run run = RunToEnd(Request("openai", "openai"));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_EQ(Attempts(fake_, "POST", "/v1/responses"), 1);
  EXPECT_THAT(run.status_reason(), HasSubstr("HTTP 500"));
}

// Issue 10 item 5: a download cut short is fetched again (downloads are safe to repeat), and
// one that keeps being cut says so, with how much of it came.
TEST_F(OpenAiIntegrationTest, ACutDownloadIsFetchedAgain) {
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/containers/"}, {"truncate_body", true}, {"times", 2}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("openai", "openai"), &events);
  ExpectVerified(run, events);
  EXPECT_EQ(fake_.State()["faults_pending"], 0);
}

TEST_F(OpenAiIntegrationTest, ADownloadThatKeepsBeingCutSaysSo) {
  fake_.Scenario(AnalystTurns(kInput));
  fake_.Fault({{"path_prefix", "/v1/containers/"}, {"truncate_body", true}, {"times", 1000}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Request("openai", "openai"), &events);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  std::string said = run.status_reason();
  for (const auto& c : run.checks()) said += "\n" + c.detail();
  for (const auto& e : events) said += "\n" + e.DebugString();
  EXPECT_THAT(
      said, ::testing::ContainsRegex("download of [^ ]+/content cut after [0-9]+ of [0-9]+ bytes"));
}

}  // namespace
}  // namespace sandgate::testing
