// Several tenants on one daemon: fair queueing, quotas and policy, end to end.
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "common/sha256.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr char kBusy[] = "busy-token";
constexpr char kSmall[] = "small-token";

class TenantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonHarness>(
        nlohmann::json{{"max_concurrent_runs", 1},
                       {"tenants",
                        {{{"name", "busy"}, {"token_sha256", Sha256::Hex(kBusy)}},
                         {{"name", "small"},
                          {"token_sha256", Sha256::Hex(kSmall)},
                          {"policy",
                           {{"agents", {"reference"}},
                            {"network_modes", {"disabled"}},
                            {"max_memory_bytes", 1ull << 30}}},
                          {"quotas", {{"live_sessions", 1}, {"runs_per_minute", 3}}}}}},
                       {"local", {{"uid_base", 300300}, {"uid_count", 16}}}});
    daemon_->Start();
    stub_ = daemon_->Stub();
  }
  v1::Run Start(const std::string& token, const std::string& setup = "") {
    v1::RunAnalysisRequest req = SampleRequest();
    if (!setup.empty()) req.mutable_sandbox()->add_setup_commands(setup);
    v1::Run run;
    grpc::Status st = stub_->RunAnalysis(DaemonHarness::Context(token).get(), req, &run);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return run;
  }
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
};

TEST_F(TenantsTest, AQueuedRunOfAnotherTenantGoesBeforeTheBusyTenantsBacklog) {
  v1::Run a1 = Start(kBusy, "sleep 1");
  v1::Run a2 = Start(kBusy);
  v1::Run a3 = Start(kBusy);
  v1::Run b1 = Start(kSmall);
  std::vector<v1::Event> b_events = FollowToEnd(*stub_, b1.id(), kSmall);
  std::vector<v1::Event> a3_events = FollowToEnd(*stub_, a3.id(), kBusy);
  EXPECT_EQ(b_events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(a3_events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED);
  // b1 was told it is next in line, although two of busy's runs were queued before it.
  ASSERT_TRUE(b_events[0].has_run_queued());
  EXPECT_EQ(b_events[0].run_queued().position(), 1u);
  EXPECT_LT(b_events.back().time().seconds() * 1000000000LL + b_events.back().time().nanos(),
            a3_events.back().time().seconds() * 1000000000LL + a3_events.back().time().nanos())
      << "round robin: small's run finishes before busy's third";
  // a3 waited behind a2 and b1 and was told as its position moved.
  std::vector<uint32_t> positions;
  for (const auto& e : a3_events) {
    if (e.has_run_queued()) positions.push_back(e.run_queued().position());
  }
  ASSERT_FALSE(positions.empty());
  EXPECT_GT(positions.front(), 1u);
  EXPECT_EQ(positions.back(), 1u);
  FollowToEnd(*stub_, a1.id(), kBusy);
  FollowToEnd(*stub_, a2.id(), kBusy);
}

TEST_F(TenantsTest, QuotasAndPolicyAreEnforcedNamingTheRule) {
  // runs_per_minute: 3
  for (int i = 0; i < 3; ++i) FollowToEnd(*stub_, Start(kSmall).id(), kSmall);
  v1::Run run;
  grpc::Status st = stub_->RunAnalysis(DaemonHarness::Context(kSmall).get(), SampleRequest(), &run);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "quota runs_per_minute (3) of tenant small"))
      << st.error_message();
  // another tenant is not affected
  EXPECT_TRUE(stub_->RunAnalysis(DaemonHarness::Context(kBusy).get(), SampleRequest(), &run).ok());
  FollowToEnd(*stub_, run.id(), kBusy);

  // policy
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->set_memory_bytes(2ull << 30);
  st = stub_->RunAnalysis(DaemonHarness::Context(kSmall).get(), req, &run);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "policy of tenant small: sandbox.memory_bytes"))
      << st.error_message();

  // live_sessions: 1
  v1::CreateSessionRequest create;
  v1::Session s;
  ASSERT_TRUE(stub_->CreateSession(DaemonHarness::Context(kSmall).get(), create, &s).ok());
  st = stub_->CreateSession(DaemonHarness::Context(kSmall).get(), create, &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "quota live_sessions (1) of tenant small"))
      << st.error_message();
}

}  // namespace
}  // namespace sandgate::testing

namespace sandgate::testing {
namespace {

// Issue 9 items 9-11 through the real daemon, for a tenant that has no policy:
// the machine's ceilings and every field's bounds still hold, a key is bound to
// its request, and a kept session's network decisions are readable from its own
// log.
TEST_F(TenantsTest, ATenantWithoutPolicyStillMeetsTheDaemonsCeilings) {
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->set_memory_bytes(1ull << 63);
  v1::Run run;
  grpc::Status st = stub_->RunAnalysis(DaemonHarness::Context(kBusy).get(), req, &run);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(),
            "sandbox.memory_bytes: at most 64 GiB (daemon ceiling "
            "limits.memory_bytes)");
  req = SampleRequest();
  req.mutable_sandbox()->add_files()->set_path("../../etc/x");
  st = stub_->RunAnalysis(DaemonHarness::Context(kBusy).get(), req, &run);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "sandbox.files[0].path")) << st.error_message();
  req = SampleRequest();
  req.set_idempotency_key(std::string(1 << 20, 'k'));
  st = stub_->RunAnalysis(DaemonHarness::Context(kBusy).get(), req, &run);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(st.error_message(), "idempotency_key: at most 256 bytes"))
      << st.error_message();

  req = SampleRequest();
  req.set_idempotency_key("pay-once");
  v1::Run first;
  ASSERT_TRUE(stub_->RunAnalysis(DaemonHarness::Context(kBusy).get(), req, &first).ok());
  (*req.mutable_labels())["changed"] = "yes";
  st = stub_->RunAnalysis(DaemonHarness::Context(kBusy).get(), req, &run);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(
      st.error_message(),
      "idempotency_key 'pay-once' was used for a different request (" + first.id() + ")"))
      << st.error_message();
  FollowToEnd(*stub_, first.id(), kBusy);
}

// The only host allowed is 127.0.0.2, which the proxy's SSRF guard refuses: the
// refusal is a network.decision in the kept session's own log (StreamEvents
// with the session's id).
TEST_F(TenantsTest, AKeptSessionsRefusedConnectionIsANetworkDecisionInItsLog) {
  v1::CreateSessionRequest create;
  create.mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
  create.mutable_sandbox()->mutable_network()->add_allowed_domains("127.0.0.2");
  v1::Session session;
  grpc::Status st = stub_->CreateSession(DaemonHarness::Context(kBusy).get(), create, &session);
  ASSERT_TRUE(st.ok()) << st.error_message();

  v1::ExecRequest exec;
  exec.set_session_id(session.id());
  exec.set_command("curl -sS -m 5 http://127.0.0.2/ || true");
  auto ctx = DaemonHarness::Context(kBusy);
  auto reader = stub_->Exec(ctx.get(), exec);
  v1::ExecResponse msg;
  while (reader->Read(&msg)) {
  }
  ASSERT_TRUE(reader->Finish().ok());

  // Decisions are appended off the proxy's thread: read the log until one is there.
  bool refused = false;
  EXPECT_TRUE(Eventually("the refused connection's network.decision in the session's log", [&] {
    v1::StreamEventsRequest read;
    read.set_run_id(session.id());
    auto rctx = DaemonHarness::Context(kBusy);
    auto events = stub_->StreamEvents(rctx.get(), read);
    v1::Event e;
    while (events->Read(&e)) {
      if (e.has_network() && e.network().host() == "127.0.0.2" &&
          e.network().verdict() == "denied" && e.network().reason() == "blocked-by-ssrf-guard") {
        refused = true;
      }
    }
    grpc::Status end = events->Finish();
    EXPECT_TRUE(end.ok()) << end.error_message();
    return refused || !end.ok();
  }));
  EXPECT_TRUE(refused) << "no network.decision refusing 127.0.0.2 in session " << session.id()
                       << "'s log";
  // Following the log ends with the session's close.
  v1::CloseSessionRequest close;
  close.set_session_id(session.id());
  v1::Session closed;
  ASSERT_TRUE(stub_->CloseSession(DaemonHarness::Context(kBusy).get(), close, &closed).ok());
  std::vector<v1::Event> all = FollowToEnd(*stub_, session.id(), kBusy);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.front().type(), "session.created");
  EXPECT_EQ(all.back().type(), "session.closed");
  // Another tenant cannot read it.
  v1::StreamEventsRequest read;
  read.set_run_id(session.id());
  auto sctx = DaemonHarness::Context(kSmall);
  auto other = stub_->StreamEvents(sctx.get(), read);
  v1::Event e;
  while (other->Read(&e)) {
  }
  EXPECT_EQ(other->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace sandgate::testing

namespace sandgate::testing {
namespace {

// Issue 20 item 2: Exec's threads were one pool in arrival order, so one tenant's long
// commands made every other tenant's wait for them. Two threads here: busy holds both and
// queues a third; small's echo is admitted at once, while busy's still run.
class ExecFairnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonHarness>(
        nlohmann::json{{"max_concurrent_execs", 2},
                       {"tenants",
                        {{{"name", "busy"}, {"token_sha256", Sha256::Hex(kBusy)}},
                         {{"name", "small"}, {"token_sha256", Sha256::Hex(kSmall)}}}},
                       {"local", {{"uid_base", 300300}, {"uid_count", 16}}}});
    daemon_->Start();
    stub_ = daemon_->Stub();
  }
  std::string CreateSession(const std::string& token) {
    v1::Session s;
    grpc::Status st =
        stub_->CreateSession(DaemonHarness::Context(token).get(), v1::CreateSessionRequest(), &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s.id();
  }
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
};

// One Exec call left open: its stream and its context (to cancel it).
struct OpenExec {
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReader<v1::ExecResponse>> reader;
};

OpenExec StartExec(v1::Sandgate::Stub& stub, const std::string& token, const std::string& session,
                   const std::string& command) {
  OpenExec e;
  e.ctx = DaemonHarness::Context(token);
  e.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::ExecRequest req;
  req.set_session_id(session);
  req.set_command(command);
  e.reader = stub.Exec(e.ctx.get(), req);
  return e;
}

TEST_F(ExecFairnessTest, AnotherTenantsExecIsAdmittedWhileOneTenantHoldsEveryThread) {
  const std::string busy_session = CreateSession(kBusy);
  const std::string small_session = CreateSession(kSmall);
  std::vector<OpenExec> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(StartExec(*stub_, kBusy, busy_session, "echo started; exec sleep 600"));
    v1::ExecResponse first;
    ASSERT_TRUE(busy.back().reader->Read(&first)) << daemon_->Log();
    EXPECT_EQ(first.output().data(), "started\n");
  }
  // Both threads are busy's; a third of its commands waits for one of them.
  busy.push_back(StartExec(*stub_, kBusy, busy_session, "echo started; exec sleep 600"));

  OpenExec echo = StartExec(*stub_, kSmall, small_session, "echo hi");
  echo.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::string out;
  bool finished = false;
  v1::ExecResponse r;
  while (echo.reader->Read(&r)) {
    out += r.output().data();
    if (r.has_finished()) finished = r.finished().exit_code() == 0;
  }
  grpc::Status st = echo.reader->Finish();
  EXPECT_TRUE(st.ok()) << "small's echo waited behind busy's commands: " << st.error_message();
  EXPECT_EQ(out, "hi\n");
  EXPECT_TRUE(finished);

  // busy's commands run on (`sleep 600`): small's was admitted without any of them ending.
  for (OpenExec& e : busy) e.ctx->TryCancel();
  for (OpenExec& e : busy) {
    while (e.reader->Read(&r)) {
      EXPECT_FALSE(r.has_finished()) << "a busy command ended before it was cancelled";
    }
    EXPECT_EQ(e.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
}

}  // namespace
}  // namespace sandgate::testing
