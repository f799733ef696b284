// The real daemon with the openai-agents provider (the beta Agents API) against the fake OpenAI
// server: the financial analyst verifies; the sandbox probe passes with the network disabled
// and restricted, and fails when the fake leaves it open; faults end retried or in a clear
// status; the fake holds no session, environment or artifact after every test, also after a
// SIGKILLed daemon is restarted; what the Agents API cannot do is refused before anything is
// made; the API key shows up nowhere.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "playbooks/playbook.h"
#include "tests/common/temp_dir.h"
#include "tests/fakes/host_listener.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "tests/fakes/openai/reference_plan_turns.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kApiKey[] = "sk-agents-SECRET-9b1e7c5a3d2f4e6a8c0b1d3f5a7c9e2b";
constexpr char kProvider[] = "openai-agents";
constexpr char kEventsArtifact[] = "agents-events.jsonl";

class AgentsRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.Start());
    ASSERT_TRUE(key_dir_.ok());
    key_file_ = WriteKeyFile(key_dir_.path(), kApiKey);
    daemon_ = std::make_unique<DaemonHarness>(json{
        {"local", {{"uid_base", 320000}, {"uid_count", 64}}},
        {"openai",
         {{"base_url", fake_.base_url()}, {"api_key_file", key_file_}, {"model", "fake-model"}}}});
    daemon_->Start();
    stub_ = daemon_->Stub();
  }

  void TearDown() override {
    daemon_->Stop(SIGTERM);
    ExpectNothingUpstream();
  }

  void ExpectNothingUpstream() {
    const json agents = fake_.State()["agents"];
    EXPECT_EQ(agents["sessions"], json::array()) << agents.dump();
    EXPECT_EQ(agents["environments"], json::array()) << agents.dump();
    EXPECT_EQ(agents["artifacts"], json::array()) << agents.dump();
  }

  static const playbooks::Playbook& Playbook(const std::string& name) {
    return **playbooks::FindPlaybook(name);
  }

  // The analyst on the sample; the fake's agent plays the playbook's own reference program.
  v1::RunAnalysisRequest Analyst() {
    v1::RunAnalysisRequest req = SampleRequest();
    req.set_provider(kProvider);
    req.set_agent("openai");
    const playbooks::Playbook& p = Playbook("financial-analyst");
    std::vector<playbooks::InputFile> inputs = {{req.inputs(0).name(), req.inputs(0).content()}};
    fake_.Scenario(
        ReferencePlanTurns(p.Reference(inputs, "/workspace", {}), p.ExpectedArtifacts()));
    return req;
  }

  // The probe with env, a setup command and `network`; its URL (in the plan the fake plays)
  // points at the host listener unless the network is restricted.
  v1::RunAnalysisRequest Probe(v1::NetworkPolicy::Mode mode,
                               const std::vector<std::string>& domains = {}) {
    v1::RunAnalysisRequest req;
    req.set_playbook("sandbox-probe");
    req.set_provider(kProvider);
    req.set_agent("openai");
    auto* in = req.add_inputs();
    in->set_name("data.csv");
    in->set_content("year,revenue\n2024,1\n");
    v1::SandboxSpec* sb = req.mutable_sandbox();
    (*sb->mutable_env())["TEAM"] = "blue";
    sb->add_setup_commands("echo setup-ran > /workspace/setup.txt");
    sb->mutable_network()->set_mode(mode);
    playbooks::TaskSettings settings;
    settings.env = {{"TEAM", "blue"}};
    settings.setup_commands = {sb->setup_commands(0)};
    settings.network = mode == v1::NetworkPolicy::MODE_RESTRICTED ? "restricted" : "disabled";
    for (const std::string& d : domains) {
      sb->mutable_network()->add_allowed_domains(d);
      settings.allowed_domains.push_back(d);
    }
    const playbooks::Playbook& p = Playbook("sandbox-probe");
    playbooks::ReferencePlan plan =
        p.Reference({{"data.csv", in->content()}}, "/workspace", settings);
    for (playbooks::PlacedFile& f : plan.files) {
      if (f.path != "probe.json" || mode == v1::NetworkPolicy::MODE_RESTRICTED) continue;
      json config = json::parse(f.content);
      config["probe_url"] = absl::StrCat("http://127.0.0.1:", listener_.port(), "/");
      f.content = config.dump();
    }
    fake_.Scenario(ReferencePlanTurns(plan, p.ExpectedArtifacts()));
    return req;
  }

  std::string Start(const v1::RunAnalysisRequest& req) {
    auto ctx = DaemonHarness::Context();
    v1::Run run;
    grpc::Status st = stub_->RunAnalysis(ctx.get(), req, &run);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return run.id();
  }

  v1::Run Get(const std::string& id) {
    v1::GetRunRequest get;
    get.set_run_id(id);
    v1::Run run;
    auto ctx = DaemonHarness::Context();
    EXPECT_TRUE(stub_->GetRun(ctx.get(), get, &run).ok());
    return run;
  }

  v1::Run RunToEnd(const v1::RunAnalysisRequest& req, std::vector<v1::Event>* events = nullptr,
                   const std::function<void(const v1::Event&)>& on_event = nullptr) {
    const std::string id = Start(req);
    std::vector<v1::Event> ev = FollowToEnd(*stub_, id, "", 0, on_event);
    if (events != nullptr) *events = std::move(ev);
    return Get(id);
  }

  std::string Download(const v1::Run& run, const std::string& name) {
    DownloadedArtifact d = DownloadArtifact(*stub_, run.id(), name);
    EXPECT_TRUE(d.status.ok()) << name << ": " << d.status.error_message();
    return d.data;
  }

  // Succeeded, every check passed, the raw events kept beside the playbook's artifacts.
  void ExpectVerified(const v1::Run& run, const std::vector<v1::Event>& events,
                      size_t playbook_artifacts) {
    EXPECT_EQ(run.status(), v1::RUN_STATUS_SUCCEEDED) << run.status_reason() << "\n"
                                                      << daemon_->Log();
    EXPECT_EQ(run.artifacts_size(), static_cast<int>(playbook_artifacts) + 1);
    EXPECT_GT(run.checks_size(), 0);
    for (const auto& c : run.checks()) EXPECT_TRUE(c.passed()) << c.name() << ": " << c.detail();
    EXPECT_GE(CountEvents(events, "command.started"), 2);
    EXPECT_EQ(CountEvents(events, "command.started"), CountEvents(events, "command.finished"));
    EXPECT_GE(CountEvents(events, "command.output"), 1);
    EXPECT_GE(CountEvents(events, "token_usage"), 1);
    EXPECT_GE(CountEvents(events, "agent_message"), 1);
  }

  // Runs `req` until its first command has started, then hands the run id back.
  std::string StartAndAwaitCommand(const v1::RunAnalysisRequest& req) {
    const std::string id = Start(req);
    auto ctx = DaemonHarness::Context();
    v1::StreamEventsRequest s;
    s.set_run_id(id);
    s.set_follow(true);
    auto reader = stub_->StreamEvents(ctx.get(), s);
    v1::Event e;
    bool started = false;
    while (!started && reader->Read(&e)) started = e.type() == "command.started";
    EXPECT_TRUE(started);
    ctx->TryCancel();
    reader->Finish();
    return id;
  }

  // A run whose one command sleeps, so that it can be stopped mid-turn.
  v1::RunAnalysisRequest Sleeper() {
    fake_.Scenario(
        json::array({{{"shell", {"sleep 30"}}, {"timeout_ms", 60000}}, {{"message", "done"}}}));
    v1::RunAnalysisRequest req = SampleRequest();
    req.set_provider(kProvider);
    req.set_agent("openai");
    return req;
  }

  // The /v1 requests the fake saw, as "METHOD path".
  std::vector<std::string> Requests() {
    std::vector<std::string> out;
    const json state = fake_.State();
    for (const auto& r : state["requests"]) {
      out.push_back(absl::StrCat(r.value("method", ""), " ", r.value("path", "")));
    }
    return out;
  }

  FakeOpenAiServer fake_{kApiKey};
  HostListener listener_;
  ScopedTempDir key_dir_{"sg-key"};
  std::string key_file_;
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
};

TEST_F(AgentsRunTest, TheFinancialAnalystVerifies) {
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Analyst(), &events);
  ExpectVerified(run, events, Playbook("financial-analyst").ExpectedArtifacts().size());
  EXPECT_EQ(run.provider(), kProvider);
  bool mapped = false, ready = false;
  for (const auto& e : events) {
    if (e.type() == "session.created") {
      EXPECT_EQ(e.session_created().provider(), kProvider);
      for (const auto& w : e.session_created().unenforced()) {
        mapped |= absl::StrContains(w, "container_size small");
      }
    }
    ready |= e.type() == "notice" && absl::StrContains(e.notice().message(), ": ready");
  }
  EXPECT_TRUE(mapped);
  EXPECT_TRUE(ready) << "environment states become notices";
  // The raw events, one JSON object per line, from the session's creation to the turn's end.
  const std::string raw = Download(run, kEventsArtifact);
  EXPECT_THAT(raw, HasSubstr("\"agent.session.created\""));
  EXPECT_THAT(raw, HasSubstr("\"agent.session.turn.completed\""));
  EXPECT_THAT(raw, HasSubstr("\"command_execution\""));
  for (absl::string_view line : absl::StrSplit(raw, '\n', absl::SkipEmpty())) {
    EXPECT_FALSE(json::parse(line, nullptr, false).is_discarded()) << line;
  }
  // Created once (streaming), then deleted; nothing sent twice.
  int creates = 0, deletes = 0;
  for (const std::string& r : Requests()) {
    creates += r == "POST /v1/agents/sessions";
    deletes += absl::StartsWith(r, "DELETE /v1/agents/sessions/");
  }
  EXPECT_EQ(creates, 1);
  EXPECT_EQ(deletes, 1);
}

TEST_F(AgentsRunTest, TheProbePassesWithTheNetworkDisabled) {
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Probe(v1::NetworkPolicy::MODE_DISABLED), &events);
  ExpectVerified(run, events, Playbook("sandbox-probe").ExpectedArtifacts().size());
  EXPECT_THAT(Download(run, kEventsArtifact), HasSubstr("\"access\":\"disabled\""));
}

TEST_F(AgentsRunTest, TheProbePassesWithARestrictedNetwork) {
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(Probe(v1::NetworkPolicy::MODE_RESTRICTED, {"example.com"}), &events);
  ExpectVerified(run, events, Playbook("sandbox-probe").ExpectedArtifacts().size());
  // The environment was made with exactly that policy (the create's answer echoes it).
  const std::string raw = Download(run, kEventsArtifact);
  EXPECT_THAT(raw, HasSubstr("\"access\":\"restricted\""));
  EXPECT_THAT(raw, HasSubstr("\"allowed_domains\":[\"example.com\"]"));
}

TEST_F(AgentsRunTest, TheProbeFailsTheRunWhenTheNetworkIsLeftOpen) {
  fake_.LeaveNetworkOpen(true);
  v1::Run run = RunToEnd(Probe(v1::NetworkPolicy::MODE_DISABLED));
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("verification failed: probe.network_blocked"));
}

TEST_F(AgentsRunTest, RateLimitsServerErrorsAndADroppedStreamAreRetried) {
  v1::RunAnalysisRequest req = Analyst();
  fake_.Fault({{"path_prefix", "/v1/agents/sessions"},
               {"method", "POST"},
               {"status", 429},
               {"retry_after", "1"}});
  fake_.Fault({{"path_prefix", "/v1/agents/sessions"}, {"method", "POST"}, {"status", 500}});
  // The create's stream breaks mid-turn: it is followed on GET …/events, never created again.
  fake_.Fault({{"path_prefix", "/v1/agents/sessions"},
               {"method", "POST"},
               {"drop_mid_stream", true},
               {"after_frames", 12}});
  std::vector<v1::Event> events;
  v1::Run run = RunToEnd(req, &events);
  ExpectVerified(run, events, Playbook("financial-analyst").ExpectedArtifacts().size());
  int landed = 0;
  const json state = fake_.State();
  for (const auto& r : state["requests"]) {
    landed += r["method"] == "POST" && r["path"] == "/v1/agents/sessions" && r["status"] == 200;
  }
  EXPECT_EQ(landed, 1) << "one session made";
}

TEST_F(AgentsRunTest, AResetEnvironmentFailsTheRunInsteadOfGoingOn) {
  v1::RunAnalysisRequest req = Analyst();
  fake_.AgentsFault({{"kind", "environment_reset"}, {"after_commands", 1}});
  v1::Run run = RunToEnd(req);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("was reset mid-run"));
  // The reset names its environment at the top level of the event.
  EXPECT_THAT(run.status_reason(), HasSubstr("environment env_"));
  EXPECT_THAT(run.status_reason(), Not(HasSubstr("unnamed")));
}

// As outside testing saw it: an artifact list that keeps answering HTTP 500 failed the run as
// "artifact missing". The outputs could not be read, and the run says so.
TEST_F(AgentsRunTest, AnArtifactListThatKeepsFailingFailsTheRunSayingWhy) {
  v1::RunAnalysisRequest req = Analyst();
  fake_.Fault({{"path_prefix", "/v1/agents/sessions/"},
               {"method", "GET"},
               {"status", 500},
               {"times", 1000}});
  v1::Run run = RunToEnd(req);
  fake_.Delete("/_fake/faults");
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("artifacts cannot be read (listing them)"));
  EXPECT_THAT(run.status_reason(), HasSubstr("500"));
  EXPECT_THAT(run.status_reason(), Not(HasSubstr("missing")));
}

// A kept session on this provider runs one agent task: the first run in it works, and a second
// is refused when it is sent, saying why, instead of being accepted and failing later.
TEST_F(AgentsRunTest, AKeptSessionTakesOneRunAndRefusesTheNextUpFront) {
  v1::CreateSessionRequest create;
  create.set_provider(kProvider);
  v1::Session session;
  {
    auto ctx = DaemonHarness::Context();
    grpc::Status st = stub_->CreateSession(ctx.get(), create, &session);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  v1::RunAnalysisRequest req = Analyst();
  req.set_session_id(session.id());
  v1::Run run = RunToEnd(req);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_SUCCEEDED) << run.status_reason();

  v1::Run second;
  auto ctx = DaemonHarness::Context();
  grpc::Status st = stub_->RunAnalysis(ctx.get(), req, &second);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_THAT(st.error_message(), HasSubstr("has run its agent task"));
  EXPECT_THAT(st.error_message(), HasSubstr("without session_id"));

  v1::CloseSessionRequest close;
  close.set_session_id(session.id());
  v1::Session closed;
  auto close_ctx = DaemonHarness::Context();
  EXPECT_TRUE(stub_->CloseSession(close_ctx.get(), close, &closed).ok());
}

TEST_F(AgentsRunTest, AnExpiredEnvironmentAndAFailedTurnFailClearly) {
  v1::RunAnalysisRequest req = Analyst();
  fake_.AgentsFault({{"kind", "environment_expired"}, {"after_commands", 1}});
  v1::Run run = RunToEnd(req);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("expired mid-run"));
  ExpectNothingUpstream();

  req = Analyst();
  fake_.AgentsFault({{"kind", "turn_failed"},
                     {"after_commands", 1},
                     {"code", "server_error"},
                     {"message", "the harness fell over"}});
  run = RunToEnd(req);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(),
              HasSubstr("the Agents API turn failed: server_error: the harness fell over"));
  ExpectNothingUpstream();

  // A server that keeps failing: the create's error, after the retries.
  req = Analyst();
  fake_.Fault({{"path_prefix", "/v1/agents/sessions"}, {"status", 500}, {"times", 20}});
  run = RunToEnd(req);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_FAILED);
  EXPECT_THAT(run.status_reason(), HasSubstr("the Agents API"));
  EXPECT_THAT(run.status_reason(), HasSubstr("500"));
}

TEST_F(AgentsRunTest, CancelSendsTheCancelEventThenDeletes) {
  const std::string id = StartAndAwaitCommand(Sleeper());
  v1::CancelRunRequest cancel;
  cancel.set_run_id(id);
  cancel.set_reason("changed my mind");
  v1::Run r;
  ASSERT_TRUE(stub_->CancelRun(DaemonHarness::Context().get(), cancel, &r).ok());
  FollowToEnd(*stub_, id);
  EXPECT_EQ(Get(id).status(), v1::RUN_STATUS_CANCELLED);
  std::vector<std::string> reqs = Requests();
  int cancelled_at = -1, deleted_at = -1;
  for (int i = 0; i < static_cast<int>(reqs.size()); ++i) {
    if (absl::StartsWith(reqs[i], "POST /v1/agents/sessions/") &&
        absl::EndsWith(reqs[i], "/events") && cancelled_at < 0) {
      cancelled_at = i;
    }
    if (absl::StartsWith(reqs[i], "DELETE /v1/agents/sessions/")) deleted_at = i;
  }
  EXPECT_GE(cancelled_at, 0) << absl::StrJoin(reqs, "\n");
  EXPECT_GT(deleted_at, cancelled_at) << absl::StrJoin(reqs, "\n");
  ExpectNothingUpstream();
}

TEST_F(AgentsRunTest, ARunTimeoutDeletesTheSession) {
  v1::RunAnalysisRequest req = Sleeper();
  req.mutable_run_timeout()->set_seconds(3);
  v1::Run run = RunToEnd(req);
  EXPECT_EQ(run.status(), v1::RUN_STATUS_TIMED_OUT) << run.status_reason();
  ExpectNothingUpstream();
}

TEST_F(AgentsRunTest, ASigkilledDaemonsSessionIsSweptOnRestart) {
  const std::string id = StartAndAwaitCommand(Sleeper());
  daemon_->Stop(SIGKILL);
  ASSERT_EQ(fake_.State()["agents"]["sessions"].size(), 1u);
  daemon_->Start();
  stub_ = daemon_->Stub();
  EXPECT_TRUE(Eventually(
      "the restarted daemon to delete the killed one's agent session",
      [&] { return fake_.State()["agents"]["sessions"].empty(); }, absl::Seconds(20)));
  EXPECT_EQ(Get(id).status(), v1::RUN_STATUS_FAILED);
}

TEST_F(AgentsRunTest, WhatTheAgentsApiCannotDoIsRefusedBeforeAnythingIsMade) {
  auto refused = [&](const v1::RunAnalysisRequest& req) {
    v1::Run run;
    return stub_->RunAnalysis(DaemonHarness::Context().get(), req, &run);
  };
  v1::RunAnalysisRequest base = SampleRequest();
  base.set_provider(kProvider);
  base.set_agent("openai");
  struct Case {
    std::function<void(v1::RunAnalysisRequest&)> change;
    std::string field;
  };
  for (const Case& c : std::vector<Case>{
           {[](v1::RunAnalysisRequest& r) {
              r.mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
              r.mutable_sandbox()->mutable_network()->add_allowed_domains("*.example.com");
            },
            "sandbox.network.allowed_domains[0]: '*.example.com' is a pattern"},
           {[](v1::RunAnalysisRequest& r) { r.mutable_sandbox()->set_memory_bytes(2ull << 30); },
            "sandbox.memory_bytes: 2147483648 is not an Agents API container size"},
           {[](v1::RunAnalysisRequest& r) { (*r.mutable_sandbox()->mutable_env())["PATH"] = "/x"; },
            "sandbox.env[PATH]"},
           {[](v1::RunAnalysisRequest& r) { r.set_agent("reference"); },
            "agent: 'reference' runs its commands in the sandbox"},
           {[](v1::RunAnalysisRequest& r) { r.set_agent("chat"); }, "agent: 'chat'"},
       }) {
    v1::RunAnalysisRequest req = base;
    c.change(req);
    grpc::Status st = refused(req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.field;
    EXPECT_THAT(st.error_message(), HasSubstr(c.field));
  }
  for (const std::string& r : Requests()) {
    EXPECT_FALSE(absl::StartsWith(r, "POST /v1/agents")) << "made upstream: " << r;
  }
}

// A tenant's policy (providers, models, network modes, domains) applies on this path as on
// every other, before anything is made.
TEST_F(AgentsRunTest, TheTenantsPolicyApplies) {
  daemon_->Stop(SIGTERM);
  constexpr char kToken[] = "agents-team-token";
  daemon_ = std::make_unique<DaemonHarness>(
      json{{"local", {{"uid_base", 320000}, {"uid_count", 64}}},
           {"openai",
            {{"base_url", fake_.base_url()}, {"api_key_file", key_file_}, {"model", "fake-model"}}},
           {"tenants",
            {{{"name", "team"},
              {"token_sha256", Sha256Hex(kToken)},
              {"policy",
               {{"providers", {kProvider}},
                {"models", {"fake-model"}},
                {"network_modes", {"disabled", "restricted"}},
                {"domains", {"example.com"}}}}}}}});
  daemon_->Start();
  stub_ = daemon_->Stub();
  struct Case {
    std::function<void(v1::RunAnalysisRequest&)> change;
    std::string said;
  };
  for (const Case& c : std::vector<Case>{
           {[](v1::RunAnalysisRequest& r) { r.set_provider("local"); }, "provider 'local'"},
           {[](v1::RunAnalysisRequest& r) { r.set_model("gpt-other"); }, "model 'gpt-other'"},
           {[](v1::RunAnalysisRequest& r) {
              r.mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_ENABLED);
            },
            "network mode 'enabled'"},
           {[](v1::RunAnalysisRequest& r) {
              r.mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
              r.mutable_sandbox()->mutable_network()->add_allowed_domains("pypi.org");
            },
            "domain 'pypi.org'"}}) {
    v1::RunAnalysisRequest req = SampleRequest();
    req.set_provider(kProvider);
    req.set_agent("openai");
    c.change(req);
    v1::Run run;
    grpc::Status st = stub_->RunAnalysis(DaemonHarness::Context(kToken).get(), req, &run);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << c.said;
    EXPECT_THAT(st.error_message(), HasSubstr(c.said));
  }
  for (const std::string& r : Requests()) {
    EXPECT_FALSE(absl::StartsWith(r, "POST /v1/agents")) << "made upstream: " << r;
  }
}

TEST_F(AgentsRunTest, ADrainCancelsAndDeletesTheSession) {
  const std::string id = StartAndAwaitCommand(Sleeper());
  daemon_->Stop(SIGTERM);
  ExpectNothingUpstream();
  bool cancelled = false;
  for (const std::string& r : Requests()) {
    cancelled |= absl::StartsWith(r, "POST /v1/agents/sessions/") && absl::EndsWith(r, "/events");
  }
  EXPECT_TRUE(cancelled) << "the cancel event is sent before the delete";
  daemon_->Start();
  stub_ = daemon_->Stub();
  EXPECT_EQ(Get(id).status(), v1::RUN_STATUS_CANCELLED);
}

// `sandgate run` on this path: the same progress display, the artifacts downloaded (the raw
// Agents API events among them); the probe's flags map to the environment.
TEST_F(AgentsRunTest, TheCliRunsBothPlaybooksOnTheAgentsApi) {
  auto cli = [&](const std::string& args) {
    std::string cmd =
        "SANDGATE_ADDR=" + daemon_->address() + " " + SANDGATE_CLI_PATH + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    int status = pclose(p);
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  const std::string sample = daemon_->dir() + "/" + SampleRequest().inputs(0).name();
  std::ofstream(sample) << SampleRequest().inputs(0).content();
  Analyst();
  const std::string out_dir = daemon_->dir() + "/analyst";
  auto [code, out] =
      cli("run " + sample + " --provider openai-agents --agent openai --out " + out_dir);
  EXPECT_EQ(code, 0) << out;
  for (const char* expect : {"python3", "pass calculated_metrics.values", "run SUCCEEDED"}) {
    EXPECT_THAT(out, HasSubstr(expect));
  }
  for (const char* f : {"calculated_metrics.csv", "investment_analysis.md", kEventsArtifact}) {
    struct stat st;
    EXPECT_EQ(stat((out_dir + "/" + f).c_str(), &st), 0) << f;
  }

  v1::RunAnalysisRequest probe = Probe(v1::NetworkPolicy::MODE_DISABLED);
  const std::string data = daemon_->dir() + "/data.csv";
  std::ofstream(data) << probe.inputs(0).content();
  auto [pcode, pout] = cli("run " + data +
                           " --playbook sandbox-probe --provider openai-agents --agent openai"
                           " --env TEAM=blue --setup 'echo setup-ran > /workspace/setup.txt'"
                           " --network disabled --out " +
                           daemon_->dir() + "/probe");
  EXPECT_EQ(pcode, 0) << pout;
  EXPECT_THAT(pout, HasSubstr("run SUCCEEDED"));
}

TEST_F(AgentsRunTest, TheApiKeyIsNowhere) {
  // The environment as the agent's commands see it.
  fake_.Scenario(json::array({{{"shell", {"env", "cat /proc/self/environ | tr '\\0' '\\n'"}}},
                              {{"message", "that is the environment"}}}));
  v1::RunAnalysisRequest req = SampleRequest();
  req.set_provider(kProvider);
  req.set_agent("openai");
  std::vector<v1::Event> events;
  v1::Run env_run = RunToEnd(req, &events);
  std::string env_output, everything;
  for (const auto& e : events) {
    if (e.type() == "command.output") env_output += e.command_output().data();
    everything += e.DebugString();
  }
  EXPECT_THAT(env_output, HasSubstr("PATH="));  // the commands did run
  everything += Download(env_run, kEventsArtifact);
  std::vector<v1::Event> more;
  v1::Run analyst = RunToEnd(Analyst(), &more);
  EXPECT_EQ(analyst.status(), v1::RUN_STATUS_SUCCEEDED) << analyst.status_reason();
  for (const auto& e : more) everything += e.DebugString();
  for (const auto& a : analyst.artifacts()) everything += Download(analyst, a.name());
  EXPECT_FALSE(absl::StrContains(everything, kApiKey));
  EXPECT_FALSE(absl::StrContains(env_output, kApiKey));
  EXPECT_FALSE(absl::StrContains(daemon_->Log(), kApiKey));
  std::string grep = absl::StrCat("grep -rqa -- '", kApiKey, "' ", daemon_->state_dir());
  EXPECT_NE(std::system(grep.c_str()), 0) << "the key is in " << daemon_->state_dir();
}

}  // namespace
}  // namespace sandgate::testing
