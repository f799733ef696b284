// The real daemon on a temporary Unix socket: runs, streams, cancel, errors, tenants.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <google/protobuf/descriptor.pb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/sha256.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr char kAlphaToken[] = "alpha-secret-token";
constexpr char kBetaToken[] = "beta-secret-token";
constexpr char kOpsToken[] = "ops-secret-token";
constexpr uint32_t kUidBase = 300000;
constexpr uint32_t kUidCount = 64;

nlohmann::json TenantConfig(uint32_t uid_base = kUidBase) {
  return {{"tenants",
           {{{"name", "alpha"}, {"token_sha256", Sha256::Hex(kAlphaToken)}},
            {{"name", "beta"}, {"token_sha256", Sha256::Hex(kBetaToken)}},
            {{"name", "ops"}, {"token_sha256", Sha256::Hex(kOpsToken)}, {"operator", true}}}},
          {"local", {{"uid_base", uid_base}, {"uid_count", kUidCount}}}};
}

// Processes whose real uid is one of the daemon's sandbox uids. A daemon that closes a
// sandbox reaps it at once, so zombies count too, except after a SIGKILLed daemon: its
// orphans' zombies belong to the machine's PID 1, which on this VM reaps them late
// (isolation.md §2), and no daemon can reap them; they run nothing.
std::vector<std::string> SandboxProcesses(bool count_zombies = true, uint32_t uid_base = kUidBase) {
  std::vector<std::string> found;
  DIR* d = opendir("/proc");
  while (dirent* e = readdir(d)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::ifstream status(std::string("/proc/") + e->d_name + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (!count_zombies && absl::StartsWith(line, "State:") && absl::StrContains(line, "zombie"))
        break;
      if (!absl::StartsWith(line, "Uid:")) continue;
      std::vector<std::string> f = absl::StrSplit(line, absl::ByAnyChar("\t "), absl::SkipEmpty());
      uint32_t uid;
      if (f.size() > 1 && absl::SimpleAtoi(f[1], &uid) && uid >= uid_base &&
          uid < uid_base + kUidCount) {
        found.push_back(std::string(e->d_name) + " uid " + f[1]);
      }
    }
  }
  closedir(d);
  return found;
}

// Cgroup directories named after a session anywhere in the cgroup mounts.
std::vector<std::string> SessionCgroups(const std::string& session_id) {
  std::vector<std::string> found;
  std::string cmd =
      "find /sys/fs/cgroup -maxdepth 6 -type d -name '*" + session_id + "*' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[4096];
  while (p && fgets(buf, sizeof(buf), p)) found.push_back(buf);
  if (p) pclose(p);
  return found;
}

int JournalRows(const std::string& state_dir) {
  sqlite3* db = nullptr;
  sqlite3_open_v2((state_dir + "/state.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* st = nullptr;
  int rows = -1;
  if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM journal", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    rows = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

void ExpectDenseInOrder(const std::vector<v1::Event>& events) {
  for (size_t i = 0; i < events.size(); ++i) {
    ASSERT_EQ(events[i].seq(), static_cast<int64_t>(i + 1)) << "event " << i;
  }
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonHarness>(TenantConfig());
    daemon_->Start();
    stub_ = daemon_->Stub();
  }
  v1::Run StartRun(const v1::RunAnalysisRequest& req, const std::string& token = kAlphaToken) {
    v1::Run run;
    auto ctx = DaemonHarness::Context(token);
    grpc::Status st = stub_->RunAnalysis(ctx.get(), req, &run);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return run;
  }
  grpc::Status GetRun(const std::string& id, const std::string& token, v1::Run* run) {
    auto ctx = DaemonHarness::Context(token);
    v1::GetRunRequest req;
    req.set_run_id(id);
    return stub_->GetRun(ctx.get(), req, run);
  }
  std::unique_ptr<DaemonHarness> daemon_;
  std::unique_ptr<v1::Sandgate::Stub> stub_;
};

TEST_F(DaemonTest, FullRunSucceedsWithVerifiedArtifacts) {
  v1::Run run = StartRun(SampleRequest());
  ASSERT_FALSE(run.id().empty());
  std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kAlphaToken);
  ASSERT_FALSE(events.empty());
  ExpectDenseInOrder(events);
  const v1::Event& last = events.back();
  ASSERT_EQ(last.type(), "run.finished");
  EXPECT_EQ(last.run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << last.run_finished().reason() << "\n"
      << daemon_->Log();

  int checks = 0, failed = 0;
  std::set<std::string> types;
  for (const auto& e : events) {
    types.insert(e.type());
    if (e.has_check()) {
      ++checks;
      if (!e.check().passed()) ++failed;
    }
  }
  for (const char* t : {"run.queued", "run.started", "session.created", "step.started",
                        "command.started", "command.output", "command.finished",
                        "artifact.collected", "check", "session.closed", "run.finished"}) {
    EXPECT_TRUE(types.count(t)) << "no " << t << " event";
  }
  EXPECT_GT(checks, 10);
  EXPECT_EQ(failed, 0);

  v1::Run done;
  ASSERT_TRUE(GetRun(run.id(), kAlphaToken, &done).ok());
  EXPECT_EQ(done.status(), v1::RUN_STATUS_SUCCEEDED);
  EXPECT_EQ(done.last_seq(), last.seq());
  std::set<std::string> names;
  for (const auto& a : done.artifacts()) {
    names.insert(a.name());
    DownloadedArtifact d = DownloadArtifact(*stub_, run.id(), a.name(), kAlphaToken);
    ASSERT_TRUE(d.status.ok()) << a.name() << ": " << d.status.error_message();
    EXPECT_EQ(d.data.size(), a.size_bytes());
    EXPECT_EQ(d.sha256, Sha256Hex(d.data));
    EXPECT_GT(d.data.size(), 0u);
  }
  EXPECT_EQ(names, (std::set<std::string>{"analyze_financials.py", "calculated_metrics.csv",
                                          "unusual_movements.csv", "investment_analysis.md",
                                          "financial_trends.svg", "analysis_run.json"}));
  EXPECT_TRUE(SandboxProcesses().empty());
  EXPECT_EQ(JournalRows(daemon_->state_dir()), 0);
}

TEST_F(DaemonTest, TwoSubscribersAndAResumeEachSeeEveryEventOnce) {
  v1::Run run = StartRun(SampleRequest());
  std::vector<v1::Event> a, b;
  std::thread ta([&] { a = FollowToEnd(*stub_, run.id(), kAlphaToken); });
  std::thread tb([&] { b = FollowToEnd(*stub_, run.id(), kAlphaToken); });

  // A third subscriber reads a few events, disconnects, and resumes from its last seq.
  std::vector<v1::Event> c;
  {
    auto ctx = DaemonHarness::Context(kAlphaToken);
    v1::StreamEventsRequest req;
    req.set_run_id(run.id());
    req.set_follow(true);
    auto reader = stub_->StreamEvents(ctx.get(), req);
    v1::Event e;
    while (c.size() < 3 && reader->Read(&e)) {
      if (e.seq() > 0) c.push_back(e);
    }
    ctx->TryCancel();
    while (reader->Read(&e)) {
    }
    reader->Finish();
  }
  ASSERT_EQ(c.size(), 3u);
  std::vector<v1::Event> rest = FollowToEnd(*stub_, run.id(), kAlphaToken, c.back().seq());
  c.insert(c.end(), rest.begin(), rest.end());
  ta.join();
  tb.join();
  ExpectDenseInOrder(a);
  ExpectDenseInOrder(b);
  ExpectDenseInOrder(c);
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size(), c.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].SerializeAsString(), b[i].SerializeAsString());
    EXPECT_EQ(a[i].SerializeAsString(), c[i].SerializeAsString());
  }
  EXPECT_EQ(a.back().type(), "run.finished");
}

// A follow of `id` from `after`: the events it got (heartbeats left out) and how it ended,
// within `within` (a follow that never ends is DEADLINE_EXCEEDED, not a hung test).
struct Followed {
  std::vector<v1::Event> events;
  grpc::Status status;
};
Followed FollowWithin(v1::Sandgate::Stub& stub, const std::string& id, int64_t after,
                      absl::Duration within) {
  auto ctx = DaemonHarness::Context(kAlphaToken);
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + within));
  v1::StreamEventsRequest req;
  req.set_run_id(id);
  req.set_after_seq(after);
  req.set_follow(true);
  auto reader = stub.StreamEvents(ctx.get(), req);
  Followed out;
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.seq() > 0) out.events.push_back(e);
  }
  out.status = reader->Finish();
  return out;
}

// A client resuming after the last event it saw (or past it) of a finished run or a closed
// session: its follow ends at once, OK, where it used to get heartbeats until it gave up.
TEST_F(DaemonTest, AFollowFromTheEndOfAFinishedLogEndsAtOnce) {
  constexpr absl::Duration kAtOnce = absl::Seconds(10);  // heartbeats come every 15 s
  v1::Run run = StartRun(SampleRequest());
  std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kAlphaToken);
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back().type(), "run.finished");
  const int64_t last = events.back().seq();
  for (int64_t after : {last, last + 5}) {
    Followed f = FollowWithin(*stub_, run.id(), after, kAtOnce);
    EXPECT_TRUE(f.status.ok()) << "after " << after << ": " << f.status.error_message();
    EXPECT_TRUE(f.events.empty()) << "after " << after;
  }
  Followed one = FollowWithin(*stub_, run.id(), last - 1, kAtOnce);
  EXPECT_TRUE(one.status.ok()) << one.status.error_message();
  ASSERT_EQ(one.events.size(), 1u);
  EXPECT_EQ(one.events[0].type(), "run.finished");

  // A kept session's own log ends with its session.closed.
  v1::Session session;
  ASSERT_TRUE(stub_
                  ->CreateSession(DaemonHarness::Context(kAlphaToken).get(),
                                  v1::CreateSessionRequest(), &session)
                  .ok());
  v1::CloseSessionRequest close;
  close.set_session_id(session.id());
  ASSERT_TRUE(stub_->CloseSession(DaemonHarness::Context(kAlphaToken).get(), close, &session).ok());
  std::vector<v1::Event> log = FollowToEnd(*stub_, session.id(), kAlphaToken);
  ASSERT_FALSE(log.empty());
  ASSERT_EQ(log.back().type(), "session.closed");
  Followed closed = FollowWithin(*stub_, session.id(), log.back().seq(), kAtOnce);
  EXPECT_TRUE(closed.status.ok()) << closed.status.error_message();
  EXPECT_TRUE(closed.events.empty());
}

TEST_F(DaemonTest, CancelMidRunEndsCancelledAndLeavesNothing) {
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->add_setup_commands("sleep 60 & sleep 60");
  v1::Run run = StartRun(req);

  std::string session_id;
  bool cancelled = false;
  std::vector<v1::Event> events =
      FollowToEnd(*stub_, run.id(), kAlphaToken, 0, [&](const v1::Event& e) {
        if (e.has_session_created()) session_id = e.session_created().session_id();
        if (e.has_command_started() && !cancelled) {
          EXPECT_FALSE(SandboxProcesses().empty()) << "the sandbox should be running";
          auto cctx = DaemonHarness::Context(kAlphaToken);
          v1::CancelRunRequest creq;
          creq.set_run_id(run.id());
          creq.set_reason("test");
          v1::Run r;
          EXPECT_TRUE(stub_->CancelRun(cctx.get(), creq, &r).ok());
          cancelled = true;
        }
      });
  ExpectDenseInOrder(events);
  ASSERT_TRUE(cancelled);
  ASSERT_EQ(events.back().type(), "run.finished");
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_CANCELLED);
  EXPECT_TRUE(absl::StrContains(events.back().run_finished().reason(), "cancelled by the caller"));
  v1::Run done;
  ASSERT_TRUE(GetRun(run.id(), kAlphaToken, &done).ok());
  EXPECT_EQ(done.status(), v1::RUN_STATUS_CANCELLED);
  EXPECT_EQ(SandboxProcesses(), std::vector<std::string>{});
  ASSERT_FALSE(session_id.empty());
  EXPECT_EQ(SessionCgroups(session_id), std::vector<std::string>{});
  EXPECT_EQ(JournalRows(daemon_->state_dir()), 0);
}

TEST_F(DaemonTest, MalformedRequestsAreInvalidArgumentNamingTheField) {
  struct Case {
    std::function<void(v1::RunAnalysisRequest*)> mutate;
    std::string expect;
  };
  std::vector<Case> cases = {
      {[](auto* r) { r->clear_inputs(); }, "inputs"},
      {[](auto* r) { r->mutable_inputs(0)->set_name("../escape.csv"); }, "inputs[0].name"},
      {[](auto* r) { r->set_playbook("nope"); }, "playbook"},
      {[](auto* r) { r->set_agent("nope"); }, "agent"},
      {[](auto* r) { r->set_provider("nope"); }, "provider"},
      {[](auto* r) { r->mutable_inputs(0)->set_name("statements.txt"); }, ".csv"},
      {[](auto* r) { r->mutable_sandbox()->set_memory_bytes(1024); }, "sandbox.memory_bytes"},
      {[](auto* r) {
         r->mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
       },
       "sandbox.network.allowed_domains: RESTRICTED needs at least one domain"},
      {[](auto* r) {
         r->mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
         r->mutable_sandbox()->mutable_network()->add_allowed_domains("bad host\r\n");
       },
       "sandbox.network.allowed_domains[0]"},
      {[](auto* r) {
         r->mutable_inputs()->Add()->set_name("northstar_cloud_financial_statements.csv");
       },
       "duplicate"},
  };
  for (const auto& c : cases) {
    v1::RunAnalysisRequest req = SampleRequest();
    c.mutate(&req);
    auto ctx = DaemonHarness::Context(kAlphaToken);
    v1::Run run;
    grpc::Status st = stub_->RunAnalysis(ctx.get(), req, &run);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.expect;
    EXPECT_TRUE(absl::StrContains(st.error_message(), c.expect))
        << "message '" << st.error_message() << "' does not name " << c.expect;
  }
  auto ctx = DaemonHarness::Context(kAlphaToken);
  v1::ListRunsResponse list;
  ASSERT_TRUE(stub_->ListRuns(ctx.get(), v1::ListRunsRequest(), &list).ok());
  EXPECT_EQ(list.runs_size(), 0) << "a refused request must not leave a run behind";
}

TEST_F(DaemonTest, BadOrMissingTokenIsUnauthenticated) {
  for (const std::string token : {"", "wrong-token"}) {
    auto ctx = DaemonHarness::Context(token);
    v1::ListRunsResponse list;
    grpc::Status st = stub_->ListRuns(ctx.get(), v1::ListRunsRequest(), &list);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "token '" << token << "'";
    auto sctx = DaemonHarness::Context(token);
    v1::StreamEventsRequest req;
    req.set_run_id("run-x");
    auto reader = stub_->StreamEvents(sctx.get(), req);
    v1::Event e;
    while (reader->Read(&e)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
}

TEST_F(DaemonTest, OneTenantCannotSeeAnothersRuns) {
  v1::Run run = StartRun(SampleRequest(), kAlphaToken);
  FollowToEnd(*stub_, run.id(), kAlphaToken);
  v1::Run got;
  EXPECT_EQ(GetRun(run.id(), kBetaToken, &got).error_code(), grpc::StatusCode::NOT_FOUND);
  {
    auto ctx = DaemonHarness::Context(kBetaToken);
    v1::ListRunsResponse list;
    ASSERT_TRUE(stub_->ListRuns(ctx.get(), v1::ListRunsRequest(), &list).ok());
    EXPECT_EQ(list.runs_size(), 0);
  }
  {
    auto ctx = DaemonHarness::Context(kBetaToken);
    v1::CancelRunRequest req;
    req.set_run_id(run.id());
    v1::Run r;
    EXPECT_EQ(stub_->CancelRun(ctx.get(), req, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    auto ctx = DaemonHarness::Context(kBetaToken);
    v1::StreamEventsRequest req;
    req.set_run_id(run.id());
    auto reader = stub_->StreamEvents(ctx.get(), req);
    v1::Event e;
    EXPECT_FALSE(reader->Read(&e));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    auto ctx = DaemonHarness::Context(kBetaToken);
    v1::DownloadArtifactRequest req;
    req.set_run_id(run.id());
    req.set_name("calculated_metrics.csv");
    auto reader = stub_->DownloadArtifact(ctx.get(), req);
    v1::ArtifactChunk c;
    EXPECT_FALSE(reader->Read(&c));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    auto ctx = DaemonHarness::Context(kAlphaToken);
    v1::ListRunsResponse list;
    ASSERT_TRUE(stub_->ListRuns(ctx.get(), v1::ListRunsRequest(), &list).ok());
    EXPECT_EQ(list.runs_size(), 1);
  }
}

TEST_F(DaemonTest, SandboxProbePassesWithTheNetworkDisabled) {
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  auto* in = req.add_inputs();
  in->set_name("notes.txt");
  in->set_content("probe me\n");
  (*req.mutable_sandbox()->mutable_env())["PROBE_VAR"] = "visible";
  req.mutable_sandbox()->add_setup_commands("echo ready > setup-output.txt");
  v1::Run run = StartRun(req);
  std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kAlphaToken);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << events.back().run_finished().reason();
  std::set<std::string> passed;
  for (const auto& e : events) {
    if (e.has_check() && e.check().passed()) passed.insert(e.check().name());
  }
  for (const char* c :
       {"probe.inputs", "probe.env", "probe.setup_output", "probe.network_blocked"}) {
    EXPECT_TRUE(passed.count(c)) << c;
  }
}

// Restricted networking through the real daemon. The only host allowed is 127.0.0.2: a
// literal, so no DNS query leaves the machine, and a loopback address the proxy's SSRF guard
// refuses (it is not in NO_PROXY, so the probe's curl goes through the proxy); the decision
// must be in the run's events.
TEST_F(DaemonTest, RestrictedNetworkDecisionsAreRunEvents) {
  v1::RunAnalysisRequest req;
  req.set_playbook("sandbox-probe");
  auto* in = req.add_inputs();
  in->set_name("notes.txt");
  in->set_content("probe me\n");
  req.mutable_sandbox()->mutable_network()->set_mode(v1::NetworkPolicy::MODE_RESTRICTED);
  req.mutable_sandbox()->mutable_network()->add_allowed_domains("127.0.0.2");
  v1::Run run = StartRun(req);
  std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kAlphaToken);
  ExpectDenseInOrder(events);
  EXPECT_EQ(events.back().type(), "run.finished");
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << events.back().run_finished().reason();
  bool refused = false;
  for (const auto& e : events) {
    if (e.has_network() && e.network().host() == "127.0.0.2" && e.network().verdict() == "denied" &&
        e.network().reason() == "blocked-by-ssrf-guard") {
      refused = true;
    }
  }
  EXPECT_TRUE(refused) << "no network.decision refusing 127.0.0.2";
}

TEST_F(DaemonTest, OperatorsSeeEverythingPurgeAndDrain) {
  v1::Run run = StartRun(SampleRequest(), kAlphaToken);
  FollowToEnd(*stub_, run.id(), kAlphaToken);
  v1::Run seen;
  EXPECT_TRUE(GetRun(run.id(), kOpsToken, &seen).ok()) << "operators see every tenant's runs";
  v1::PurgeRequest purge;
  v1::PurgeResponse purged;
  EXPECT_EQ(stub_->Purge(DaemonHarness::Context(kAlphaToken).get(), purge, &purged).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  purge.mutable_older_than()->set_seconds(3600);
  ASSERT_TRUE(stub_->Purge(DaemonHarness::Context(kOpsToken).get(), purge, &purged).ok());
  EXPECT_EQ(purged.runs_deleted(), 0u) << "the run is not an hour old";
  purge.mutable_older_than()->set_seconds(0);
  ASSERT_TRUE(stub_->Purge(DaemonHarness::Context(kOpsToken).get(), purge, &purged).ok());
  EXPECT_EQ(purged.runs_deleted(), 1u);
  EXPECT_EQ(GetRun(run.id(), kAlphaToken, &seen).error_code(), grpc::StatusCode::NOT_FOUND);

  v1::DrainResponse drained;
  EXPECT_EQ(stub_->Drain(DaemonHarness::Context(kAlphaToken).get(), v1::DrainRequest(), &drained)
                .error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(
      stub_->Drain(DaemonHarness::Context(kOpsToken).get(), v1::DrainRequest(), &drained).ok());
  int status = 0;
  EXPECT_TRUE(Eventually("the daemon to exit after Drain", [&] {
    return waitpid(daemon_->pid(), &status, WNOHANG) == daemon_->pid();
  }));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon_->Log();
}

TEST_F(DaemonTest, OperatorsSeeTheCleanupStateAKeptSessionInItUntilItIsClosed) {
  auto list = [&](const std::string& token, v1::ListResourcesResponse* out) {
    return stub_->ListResources(DaemonHarness::Context(token).get(), v1::ListResourcesRequest(),
                                out);
  };
  v1::ListResourcesResponse resources;
  EXPECT_EQ(list(kAlphaToken, &resources).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  v1::CreateSessionRequest create;
  v1::Session session;
  ASSERT_TRUE(
      stub_->CreateSession(DaemonHarness::Context(kAlphaToken).get(), create, &session).ok());
  ASSERT_TRUE(list(kOpsToken, &resources).ok());
  auto of_session = [&](const v1::ListResourcesResponse& r) {
    std::vector<v1::Resource> found;
    for (const v1::Resource& e : r.resources()) {
      if (e.session_id() == session.id()) found.push_back(e);
    }
    return found;
  };
  std::vector<v1::Resource> entries = of_session(resources);
  ASSERT_EQ(entries.size(), 1u) << resources.DebugString();
  EXPECT_EQ(entries[0].provider(), "local");
  EXPECT_EQ(entries[0].kind(), "session");
  EXPECT_FALSE(entries[0].replica().empty());
  EXPECT_TRUE(nlohmann::json::parse(entries[0].details_json()).contains("uid"));

  v1::CloseSessionRequest close;
  close.set_session_id(session.id());
  ASSERT_TRUE(stub_->CloseSession(DaemonHarness::Context(kAlphaToken).get(), close, &session).ok());
  ASSERT_TRUE(list(kOpsToken, &resources).ok());
  EXPECT_TRUE(of_session(resources).empty()) << "a closed session's sandbox is gone, and its entry";
}

TEST_F(DaemonTest, IdempotencyKeyReturnsTheSameRun) {
  v1::RunAnalysisRequest req = SampleRequest();
  req.set_idempotency_key("job-42");
  v1::Run first = StartRun(req);
  v1::Run second = StartRun(req);
  EXPECT_EQ(first.id(), second.id());
  FollowToEnd(*stub_, first.id(), kAlphaToken);
}

TEST_F(DaemonTest, SigtermCancelsRunningRunsKeepsWaitingOnesAndExitsCleanly) {
  daemon_->Stop(SIGTERM);
  nlohmann::json config = TenantConfig();
  config["max_concurrent_runs"] = 1;  // the second run waits
  daemon_ = std::make_unique<DaemonHarness>(config);
  daemon_->Start();
  stub_ = daemon_->Stub();
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->add_setup_commands("sleep 60");
  v1::Run run = StartRun(req);
  v1::Run waiting = StartRun(SampleRequest());
  // A follower of the waiting run: its stream ends UNAVAILABLE, after a notice saying why.
  std::vector<v1::Event> waited;
  grpc::Status waited_status;
  std::thread follower([&] {
    auto ctx = DaemonHarness::Context(kAlphaToken);
    v1::StreamEventsRequest sreq;
    sreq.set_run_id(waiting.id());
    sreq.set_follow(true);
    auto reader = stub_->StreamEvents(ctx.get(), sreq);
    v1::Event e;
    while (reader->Read(&e)) {
      if (e.seq() > 0) waited.push_back(e);
    }
    waited_status = reader->Finish();
  });
  bool signalled = false;
  std::vector<v1::Event> events =
      FollowToEnd(*stub_, run.id(), kAlphaToken, 0, [&](const v1::Event& e) {
        if (e.has_command_started() && !signalled) {
          kill(daemon_->pid(), SIGTERM);
          signalled = true;
        }
      });
  ASSERT_FALSE(events.empty());
  const v1::Event& last = events.back();
  ASSERT_TRUE(signalled);
  EXPECT_EQ(last.type(), "run.finished");
  EXPECT_EQ(last.run_finished().status(), v1::RUN_STATUS_CANCELLED);
  int status = daemon_->Stop(0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << daemon_->Log();
  EXPECT_EQ(SandboxProcesses(), std::vector<std::string>{});
  EXPECT_EQ(JournalRows(daemon_->state_dir()), 0);
  follower.join();
  EXPECT_EQ(waited_status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << waited_status.error_message();
  ASSERT_FALSE(waited.empty());
  EXPECT_TRUE(absl::StrContains(waited.back().notice().message(), "stays queued"))
      << waited.back().DebugString();

  // Back up: the waiting run is queued again and runs; its events continue where they were.
  daemon_->Start();
  stub_ = daemon_->Stub();
  std::vector<v1::Event> rest = FollowToEnd(*stub_, waiting.id(), kAlphaToken, waited.back().seq());
  ASSERT_FALSE(rest.empty());
  EXPECT_EQ(rest.front().seq(), waited.back().seq() + 1);
  EXPECT_EQ(rest.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << rest.back().run_finished().reason();
}

// Its own daemon and uid range: a SIGKILLed daemon's orphans become zombies of the machine's
// PID 1, reaped late on this VM, and must not be counted by the other tests.
TEST_F(DaemonTest, RestartAfterSigkillFailsTheInterruptedRunRequeuesTheWaitingOneAndSweeps) {
  constexpr uint32_t kOwnUids = kUidBase + 500;
  daemon_->Stop(SIGTERM);
  nlohmann::json config = TenantConfig(kOwnUids);
  config["max_concurrent_runs"] = 1;  // the second run waits
  daemon_ = std::make_unique<DaemonHarness>(config);
  daemon_->Start();
  stub_ = daemon_->Stub();
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->add_setup_commands("setsid nohup sleep 300 >/dev/null 2>&1 & sleep 300");
  v1::Run run = StartRun(req);
  v1::Run waiting = StartRun(SampleRequest());
  EXPECT_EQ(waiting.status(), v1::RUN_STATUS_QUEUED);
  auto ctx = DaemonHarness::Context(kAlphaToken);
  v1::StreamEventsRequest sreq;
  sreq.set_run_id(run.id());
  sreq.set_follow(true);
  auto reader = stub_->StreamEvents(ctx.get(), sreq);
  v1::Event e;
  while (reader->Read(&e)) {
    if (e.has_command_started()) break;
  }
  ctx->TryCancel();
  reader->Finish();
  daemon_->Stop(SIGKILL);
  daemon_->Start();
  stub_ = daemon_->Stub();
  v1::Run after;
  ASSERT_TRUE(GetRun(run.id(), kAlphaToken, &after).ok());
  EXPECT_EQ(after.status(), v1::RUN_STATUS_FAILED);
  EXPECT_TRUE(absl::StrContains(after.status_reason(), "interrupted"));
  std::vector<v1::Event> events = FollowToEnd(*stub_, run.id(), kAlphaToken);
  ExpectDenseInOrder(events);
  EXPECT_EQ(events.back().type(), "run.finished");
  // The waiting run's request was kept: the new daemon queued it again and it ran.
  std::vector<v1::Event> requeued = FollowToEnd(*stub_, waiting.id(), kAlphaToken);
  ExpectDenseInOrder(requeued);
  ASSERT_FALSE(requeued.empty());
  EXPECT_EQ(requeued.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << requeued.back().run_finished().reason();
  bool told = false;
  for (const auto& ev : requeued)
    told |= ev.type() == "notice" && absl::StrContains(ev.notice().message(), "queued again");
  EXPECT_TRUE(told);
  EXPECT_EQ(SandboxProcesses(/*count_zombies=*/false, kOwnUids), std::vector<std::string>{});
  EXPECT_EQ(JournalRows(daemon_->state_dir()), 0);
}

}  // namespace
}  // namespace sandgate::testing

namespace sandgate::testing {
namespace {

// Starts sandgated with `config` and returns its first stdout line and, once it exits or is
// killed, its exit status and stderr.
struct Launched {
  pid_t pid = -1;
  FILE* out = nullptr;
  std::string err_path;
};

Launched Launch(const nlohmann::json& config, const std::string& dir) {
  std::string cfg = dir + "/config.json";
  std::ofstream(cfg) << config.dump();
  Launched l;
  l.err_path = dir + "/stderr";
  int pipefd[2];
  EXPECT_EQ(pipe(pipefd), 0);
  l.pid = fork();
  if (l.pid == 0) {
    dup2(pipefd[1], 1);
    int err = open(l.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(err, 2);
    close(pipefd[0]);
    execl(SANDGATED_PATH, "sandgated", "--config", cfg.c_str(), nullptr);
    _exit(127);
  }
  close(pipefd[1]);
  l.out = fdopen(pipefd[0], "r");
  return l;
}

std::string TempDir() {
  char tmpl[] = "/tmp/sg-start-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(DaemonMetricsTest, PrometheusPageCountsRunsAndSandboxes) {
  DaemonHarness daemon(
      nlohmann::json{{"metrics_listen", "127.0.0.1:0"},
                     {"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}}});
  daemon.Start();
  int port = daemon.MetricsPort();
  ASSERT_GT(port, 0) << daemon.Log();
  auto stub = daemon.Stub();
  v1::Run run;
  ASSERT_TRUE(stub->RunAnalysis(DaemonHarness::Context().get(), SampleRequest(), &run).ok());
  FollowToEnd(*stub, run.id());
  // run.finished is written before the run leaves the active set: wait for the gauges to settle.
  std::string page;
  EXPECT_TRUE(Eventually("the sandbox and run gauges to come back to 0", [&] {
    page = HttpGet(port, "/metrics");
    return absl::StrContains(page, "sandgate_sandboxes_in_use 0") &&
           absl::StrContains(page, "sandgate_runs_active 0");
  })) << daemon.Log();
  EXPECT_TRUE(absl::StartsWith(page, "HTTP/1.1 200 OK")) << page;
  for (const char* line :
       {"sandgate_runs_finished_total{status=\"SUCCEEDED\"} 1",
        "sandgate_sandbox_create_seconds_count 1", "sandgate_run_seconds_count 1",
        "sandgate_runs_active 0", "sandgate_queue_depth 0", "sandgate_queued_input_bytes 0",
        "sandgate_sessions_live 0", "sandgate_sandboxes_in_use 0",
        "# TYPE sandgate_sandbox_create_seconds histogram"}) {
    EXPECT_TRUE(absl::StrContains(page, line)) << "no '" << line << "' in\n" << page;
  }
  EXPECT_TRUE(absl::StartsWith(HttpGet(port, "/other"), "HTTP/1.1 404"));
}

// Every metric the registry declares (each "# TYPE" line of the page, not a list written
// here) has at least one sample after a run, a chat run whose upstream refuses connections
// (upstream errors) and a few RPCs: a metric declared and never updated fails this.
TEST(DaemonMetricsTest, EveryDeclaredMetricHasASample) {
  char tmpl[] = "/tmp/sg-metrics-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string key_file = std::string(tmpl) + "/key";
  std::ofstream(key_file) << "sk-test";
  // Port 1 on loopback: nothing listens, every attempt fails at once.
  DaemonHarness daemon(nlohmann::json{
      {"metrics_listen", "127.0.0.1:0"},
      {"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}},
      {"chat",
       {{"base_url", "http://127.0.0.1:1/v1"}, {"api_key_file", key_file}, {"model", "m"}}}});
  daemon.Start();
  auto stub = daemon.Stub();
  v1::Run run;
  ASSERT_TRUE(stub->RunAnalysis(DaemonHarness::Context().get(), SampleRequest(), &run).ok());
  FollowToEnd(*stub, run.id());
  v1::RunAnalysisRequest chat = SampleRequest();
  chat.set_agent("chat");
  v1::Run chat_run;
  ASSERT_TRUE(stub->RunAnalysis(DaemonHarness::Context().get(), chat, &chat_run).ok());
  EXPECT_EQ(FollowToEnd(*stub, chat_run.id()).back().run_finished().status(),
            v1::RUN_STATUS_FAILED);
  v1::GetRunRequest missing;
  missing.set_run_id("run_missing");
  v1::Run out;
  EXPECT_EQ(stub->GetRun(DaemonHarness::Context().get(), missing, &out).error_code(),
            grpc::StatusCode::NOT_FOUND);

  const std::string page = daemon.Metrics();
  std::vector<std::string> families;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (absl::ConsumePrefix(&line, "# TYPE "))
      families.emplace_back(line.substr(0, line.find(' ')));
  }
  EXPECT_GE(families.size(), 11u) << page;
  for (const std::string& name : families) {
    bool sampled = false;
    for (absl::string_view line : absl::StrSplit(page, '\n')) {
      if (!absl::StartsWith(line, "#") && absl::StartsWith(line, name)) sampled = true;
    }
    EXPECT_TRUE(sampled) << name << " has no sample in\n" << page;
  }
  EXPECT_TRUE(absl::StrContains(
      page, "sandgate_rpcs_total{code=\"OK\",method=\"/sandgate.v1.Sandgate/RunAnalysis\"} 2"))
      << page;
  EXPECT_TRUE(absl::StrContains(
      page, "sandgate_rpcs_total{code=\"NOT_FOUND\",method=\"/sandgate.v1.Sandgate/GetRun\"} 1"))
      << page;
  std::system(absl::StrCat("rm -rf ", tmpl).c_str());
}

// Reflection as outside tools use it: v1 (what grpcurl and buf curl ask for first) and
// v1alpha, which carry the same messages (so v1's types speak both), and health per service.
class DaemonReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_.Start();
    channel_ = grpc::CreateChannel(daemon_.address(), grpc::InsecureChannelCredentials());
  }
  std::vector<grpc::reflection::v1::ServerReflectionResponse> Ask(
      const std::string& method,
      const std::vector<grpc::reflection::v1::ServerReflectionRequest>& requests) {
    grpc::ClientContext ctx;
    auto stream =
        grpc::internal::ClientReaderWriterFactory<grpc::reflection::v1::ServerReflectionRequest,
                                                  grpc::reflection::v1::ServerReflectionResponse>::
            Create(channel_.get(),
                   grpc::internal::RpcMethod(method.c_str(),
                                             grpc::internal::RpcMethod::BIDI_STREAMING),
                   &ctx);
    std::vector<grpc::reflection::v1::ServerReflectionResponse> out;
    for (const auto& r : requests) {
      EXPECT_TRUE(stream->Write(r));
      grpc::reflection::v1::ServerReflectionResponse resp;
      EXPECT_TRUE(stream->Read(&resp));
      out.push_back(resp);
    }
    stream->WritesDone();
    grpc::Status st = stream->Finish();
    EXPECT_TRUE(st.ok()) << method << ": " << st.error_code() << " " << st.error_message();
    return out;
  }
  DaemonHarness daemon_{
      nlohmann::json{{"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}}}};
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(DaemonReflectionTest, BothVersionsListEveryServiceAndDescribeHealth) {
  for (const char* method : {"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                             "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"}) {
    SCOPED_TRACE(method);
    grpc::reflection::v1::ServerReflectionRequest list, health, sandgate, missing;
    list.set_list_services("");
    health.set_file_containing_symbol("grpc.health.v1.Health");
    sandgate.set_file_containing_symbol("sandgate.v1.Sandgate.RunAnalysis");
    missing.set_file_containing_symbol("no.such.Thing");
    auto answers = Ask(method, {list, health, sandgate, missing});
    ASSERT_EQ(answers.size(), 4u);
    std::set<std::string> services;
    for (const auto& s : answers[0].list_services_response().service()) services.insert(s.name());
    for (const char* want :
         {"sandgate.v1.Sandgate", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
          "grpc.reflection.v1alpha.ServerReflection"}) {
      EXPECT_TRUE(services.count(want)) << want;
    }
    for (int i : {1, 2}) {
      std::set<std::string> files;  // the file and its dependencies, in no promised order
      for (const std::string& bytes :
           answers[i].file_descriptor_response().file_descriptor_proto()) {
        google::protobuf::FileDescriptorProto file;
        ASSERT_TRUE(file.ParseFromString(bytes));
        files.insert(file.name());
      }
      EXPECT_TRUE(
          files.count(i == 1 ? "grpc/health/v1/health.proto" : "sandgate/v1/sandgate.proto"))
          << i;
    }
    EXPECT_EQ(answers[3].error_response().error_code(),
              static_cast<int>(grpc::StatusCode::NOT_FOUND));
  }
}

TEST_F(DaemonReflectionTest, HealthIsReportedPerService) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  for (const char* service : {"", "sandgate.v1.Sandgate"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status st = health->Check(&ctx, req, &resp);
    ASSERT_TRUE(st.ok()) << "'" << service << "': " << st.error_message();
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse resp;
  EXPECT_EQ(health->Check(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

// A balancer watching the service sees it go NOT_SERVING as soon as the daemon drains.
TEST_F(DaemonReflectionTest, HealthTurnsNotServingWhenTheDaemonDrains) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("sandgate.v1.Sandgate");
  auto watch = health->Watch(&ctx, req);
  grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  ASSERT_EQ(kill(daemon_.pid(), SIGTERM), 0);
  ASSERT_TRUE(watch->Read(&resp));
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  ctx.TryCancel();
  watch->Finish();
  int status = daemon_.Stop(0);  // already draining: wait for it
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The same, through a client that is not ours: Python's grpcio with hand-encoded reflection
// messages (tests/integration/reflection_client.py). Debian's python3-grpcio (deploy/setup.sh
// installs it) is for Debian's python3, which a pyenv or venv earlier on PATH would hide.
TEST_F(DaemonReflectionTest, APythonClientListsServicesAndChecksHealth) {
  const std::string cmd =
      absl::StrCat("/usr/bin/python3 ", SANDGATE_SOURCE_DIR,
                   "/tests/integration/reflection_client.py ", daemon_.address(), " 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_TRUE(absl::StrContains(
      out,
      "v1 services: grpc.health.v1.Health grpc.reflection.v1.ServerReflection "
      "grpc.reflection.v1alpha.ServerReflection sandgate.v1.Images sandgate.v1.Sandgate"))
      << out;
  EXPECT_TRUE(absl::StrContains(out, "v1alpha services: grpc.health.v1.Health")) << out;
  EXPECT_TRUE(absl::StrContains(out, "health sandgate.v1.Sandgate: SERVING")) << out;
}

// What gRPC itself says for a message over the daemon's 80 MiB limit: RESOURCE_EXHAUSTED, as
// for a full queue, but its message says which ("larger than max"); the daemon's own
// RESOURCE_EXHAUSTED for a full queue says "queue full".
TEST(DaemonLimitsTest, AMessageOverTheSizeLimitSaysSoNotQueueFull) {
  DaemonHarness daemon(
      nlohmann::json{{"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}}});
  daemon.Start();
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_inputs(0)->set_content(std::string(81 << 20, 'x'));
  // The harness's stub refuses to send it (its own 80 MiB limit: "Sent message larger than
  // max"); a default channel has no send limit, so the daemon refuses it ("Received ...").
  auto limited = daemon.Stub();
  auto unlimited = v1::Sandgate::NewStub(
      grpc::CreateChannel(daemon.address(), grpc::InsecureChannelCredentials()));
  for (auto* stub : {limited.get(), unlimited.get()}) {
    v1::Run run;
    grpc::Status st = stub->RunAnalysis(DaemonHarness::Context().get(), req, &run);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_TRUE(absl::StrContains(st.error_message(), stub == limited.get()
                                                          ? "Sent message larger than max"
                                                          : "Received message larger than max"))
        << st.error_message();
    EXPECT_FALSE(absl::StrContains(st.error_message(), "queue full")) << st.error_message();
  }
}

TEST(DaemonStartTest, BadConfigExitsTwoNamingTheKey) {
  std::string dir = TempDir();
  Launched l = Launch({{"listn", "unix:/tmp/x.sock"}, {"state_dir", dir + "/state"}}, dir);
  int status = 0;
  waitpid(l.pid, &status, 0);
  fclose(l.out);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  std::ifstream in(l.err_path);
  std::stringstream err;
  err << in.rdbuf();
  EXPECT_TRUE(absl::StrContains(err.str(), "listn: unknown key")) << err.str();
  std::system(("rm -rf " + dir).c_str());
}

TEST(DaemonStartTest, TcpWithTenantsServesAuthenticatedCallers) {
  std::string dir = TempDir();
  Launched l =
      Launch({{"listen", "tcp:127.0.0.1:0"},
              {"state_dir", dir + "/state"},
              {"allow_plaintext_tokens", true},  // tokens over TLS: tls_test.cc
              {"tenants", {{{"name", "alpha"}, {"token_sha256", Sha256::Hex(kAlphaToken)}}}}},
             dir);
  char line[256] = {0};
  ASSERT_NE(fgets(line, sizeof(line), l.out), nullptr);
  std::string said(line);
  ASSERT_TRUE(absl::StartsWith(said, "sandgated listening on tcp:127.0.0.1:")) << said;
  std::string target = std::string(absl::StripAsciiWhitespace(said.substr(said.find("tcp:") + 4)));
  auto stub =
      v1::Sandgate::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  v1::ListRunsResponse resp;
  EXPECT_TRUE(
      stub->ListRuns(DaemonHarness::Context(kAlphaToken).get(), v1::ListRunsRequest(), &resp).ok());
  EXPECT_EQ(
      stub->ListRuns(DaemonHarness::Context().get(), v1::ListRunsRequest(), &resp).error_code(),
      grpc::StatusCode::UNAUTHENTICATED);
  kill(l.pid, SIGINT);
  int status = 0;
  waitpid(l.pid, &status, 0);
  fclose(l.out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "SIGINT drains and exits 0";
  std::system(("rm -rf " + dir).c_str());
}

TEST(DaemonStartTest, TcpWithoutTenantsIsRefused) {
  std::string dir = TempDir();
  Launched l = Launch({{"listen", "tcp:127.0.0.1:0"}, {"state_dir", dir + "/state"}}, dir);
  int status = 0;
  waitpid(l.pid, &status, 0);
  fclose(l.out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2);
  std::ifstream in(l.err_path);
  std::stringstream err;
  err << in.rdbuf();
  EXPECT_TRUE(absl::StrContains(err.str(), "configure tenants")) << err.str();
  std::system(("rm -rf " + dir).c_str());
}

// Issue 20 item 9: a second daemon on a live daemon's state_dir deleted its socket and bumped
// its lease epoch, after which the live one's writes were refused. It must stop before it
// touches anything, saying whose directory it is.
TEST(DaemonStartTest, ASecondDaemonOnTheSameStateDirExitsAndTheFirstKeepsServing) {
  DaemonHarness first(
      nlohmann::json{{"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}}});
  first.Start();
  const std::string socket = first.address().substr(std::string("unix:").size());
  std::string dir = TempDir();
  // The same socket too, as two daemons started from one config file would have.
  Launched second = Launch({{"listen", first.address()},
                            {"state_dir", first.state_dir()},
                            {"local", {{"uid_base", kUidBase}, {"uid_count", kUidCount}}}},
                           dir);
  int status = 0;
  const bool exited = Eventually(
      "the second sandgated to exit",
      [&] { return waitpid(second.pid, &status, WNOHANG) == second.pid; }, absl::Seconds(15));
  if (!exited) {
    kill(second.pid, SIGKILL);
    waitpid(second.pid, &status, 0);
  }
  fclose(second.out);
  EXPECT_TRUE(exited) << "the second daemon kept running on the first one's state_dir";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  std::ifstream in(second.err_path);
  std::stringstream err;
  err << in.rdbuf();
  EXPECT_TRUE(absl::StrContains(
      err.str(), absl::StrCat("state_dir ", first.state_dir(),
                              " is in use by another sandgated (pid ", first.pid(), ",")))
      << err.str();
  struct stat st;
  EXPECT_EQ(stat(socket.c_str(), &st), 0) << "the first daemon's socket is gone";
  // The first one still serves, and still writes (its lease was not taken from it).
  auto stub = first.Stub();
  v1::CreateSessionRequest create;
  v1::Session session;
  grpc::Status created = stub->CreateSession(DaemonHarness::Context().get(), create, &session);
  EXPECT_TRUE(created.ok()) << created.error_message() << "\n" << first.Log();
  v1::CloseSessionRequest close;
  close.set_session_id(session.id());
  v1::Session closed;
  if (created.ok()) {
    grpc::Status ended = stub->CloseSession(DaemonHarness::Context().get(), close, &closed);
    EXPECT_TRUE(ended.ok()) << ended.error_message();
  }
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace sandgate::testing
