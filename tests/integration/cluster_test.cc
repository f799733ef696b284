// Three real replicas sharing one PostgreSQL database, on loopback TCP with mutual TLS
// (tests/integration/cluster.h), with a 2 s lease: a run on A followed live from B and C;
// calls sent to B and C for a run or a session on A (forwarded to A); one run per idempotency key
// whichever replicas a key reaches at once; SIGKILL of replica A mid-run and what B and C do about
// it; A restarted, sweeping its host and rejoining.
#include "tests/integration/cluster.h"

#include <signal.h>

#include <map>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fakes/openai/fake_openai_server.h"
#include "tests/fakes/postgres_server.h"
#include "tests/integration/daemon_harness.h"

namespace sandgate::testing {
namespace {

constexpr double kLeaseSeconds = 2;
// A dead lease is noticed the moment it ends; the margin is the cleanup (failing runs,
// deleting containers through the fake) and this test's polling, on a shared machine.
constexpr absl::Duration kMargin = absl::Seconds(5);
constexpr char kOpenAiKey[] = "sk-cluster-test-0123456789";
const std::string kAlpha = Cluster::kAlphaToken;

// Each test its own uid ranges (replica i: base + 100 i), clear of the other test binaries'.
std::unique_ptr<Cluster> MakeCluster(uint32_t uid_base, nlohmann::json config = {},
                                     const FakeOpenAiServer* fake = nullptr) {
  absl::StatusOr<std::string> dsn = PostgresServer::Shared().CreateDatabase();
  EXPECT_TRUE(dsn.ok()) << dsn.status();
  if (!dsn.ok()) return nullptr;
  ClusterOptions o;
  o.dsn = *dsn;
  o.uid_base = uid_base;
  o.lease_seconds = kLeaseSeconds;
  if (!config.is_null()) o.config = std::move(config);
  if (fake != nullptr) {
    o.openai_base_url = fake->base_url();
    o.openai_key = fake->api_key();
  }
  absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  absl::Status started = (*c)->StartAll();
  EXPECT_TRUE(started.ok()) << started;
  if (!started.ok()) return nullptr;
  return std::move(*c);
}

// Keeps the cluster's logs when the test failed.
struct KeepOnFailure {
  Cluster* c;
  ~KeepOnFailure() {
    if (::testing::Test::HasFailure() && c != nullptr) c->keep_dir();
  }
};

absl::StatusOr<v1::Run> GetRun(v1::Sandgate::Stub& stub, const std::string& id) {
  auto ctx = Cluster::Context(kAlpha);
  v1::GetRunRequest req;
  req.set_run_id(id);
  v1::Run run;
  grpc::Status st = stub.GetRun(ctx.get(), req, &run);
  if (!st.ok()) return absl::UnknownError(st.error_message());
  return run;
}

v1::Run Start(v1::Sandgate::Stub& stub, const v1::RunAnalysisRequest& req) {
  auto ctx = Cluster::Context(kAlpha);
  v1::Run run;
  grpc::Status st = stub.RunAnalysis(ctx.get(), req, &run);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return run;
}

// Follows `run_id` until its first command has started (its sandbox exists).
bool WaitForCommand(v1::Sandgate::Stub& stub, const std::string& run_id) {
  auto ctx = Cluster::Context(kAlpha);
  v1::StreamEventsRequest req;
  req.set_run_id(run_id);
  req.set_follow(true);
  auto reader = stub.StreamEvents(ctx.get(), req);
  v1::Event e;
  bool started = false;
  while (!started && reader->Read(&e)) started = e.type() == "command.started";
  ctx->TryCancel();
  reader->Finish();
  return started;
}

// The same key sent to all three replicas at once, five times: one run each time, which
// succeeds, and the table holds one run per key.
TEST(ClusterTest, SameIdempotencyKeyOnThreeReplicasAtOnceIsOneRun) {
  std::unique_ptr<Cluster> c = MakeCluster(420000);
  ASSERT_NE(c, nullptr);
  KeepOnFailure keep{c.get()};
  constexpr int kRounds = 5;
  for (int round = 0; round < kRounds; ++round) {
    v1::RunAnalysisRequest req = SampleRequest();
    req.set_idempotency_key(absl::StrCat("key-", round));
    v1::Run runs[3];
    grpc::Status status[3];
    std::vector<std::thread> threads;
    for (int i = 0; i < 3; ++i) {
      threads.emplace_back([&, i] {
        auto ctx = Cluster::Context(kAlpha);
        status[i] = c->Stub(i)->RunAnalysis(ctx.get(), req, &runs[i]);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(status[i].ok()) << Cluster::Id(i) << ": " << status[i].error_message();
      EXPECT_EQ(runs[i].id(), runs[0].id()) << "round " << round << ", " << Cluster::Id(i);
    }
    const int owner = c->IndexOf(runs[0].replica());
    ASSERT_GE(owner, 0) << runs[0].replica();
    std::vector<v1::Event> events = FollowToEnd(*c->Stub(owner), runs[0].id(), kAlpha);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED);
  }
  EXPECT_EQ(c->QueryInt("SELECT count(*) FROM runs"), kRounds);
}

// Replica A is SIGKILLed with a local run and an openai run running and a third run waiting.
// Within the lease and the margin, B or C (one of them) fails both running runs saying why,
// takes the waiting run, which succeeds there, and deletes A's container at the fake, once;
// A's local sandbox waits for A, which, restarted, sweeps it and serves again.
TEST(ClusterTest, KilledReplicaIsCleanedUpAfterByOneOtherAndSweepsWhenBack) {
  FakeOpenAiServer fake(kOpenAiKey);
  ASSERT_TRUE(fake.Start());
  std::unique_ptr<Cluster> c =
      MakeCluster(420400, {{"max_concurrent_runs", 2}}, &fake);  // a third run waits
  ASSERT_NE(c, nullptr);
  KeepOnFailure keep{c.get()};
  auto a = c->Stub(0);

  v1::RunAnalysisRequest slow_local = SampleRequest();
  slow_local.mutable_sandbox()->add_setup_commands("sleep 300");
  fake.Scenario({{{"shell", {"sleep 60"}}, {"timeout_ms", 120000}}, {{"message", "done"}}});
  v1::RunAnalysisRequest slow_openai = SampleRequest();
  slow_openai.set_provider("openai");
  slow_openai.set_agent("openai");
  const v1::Run local = Start(*a, slow_local);
  const v1::Run remote = Start(*a, slow_openai);
  const v1::Run waiting = Start(*a, SampleRequest());
  EXPECT_EQ(local.replica(), "replica-a");
  EXPECT_EQ(waiting.status(), v1::RUN_STATUS_QUEUED);
  ASSERT_TRUE(WaitForCommand(*a, local.id())) << c->Log(0);
  ASSERT_TRUE(WaitForCommand(*a, remote.id())) << c->Log(0);
  ASSERT_EQ(fake.State()["containers"].size(), 1u);

  c->Stop(0, SIGKILL);
  const absl::Time killed = absl::Now();
  auto b = c->Stub(1);
  ASSERT_TRUE(Eventually(
      "B or C to fail A's two running runs",
      [&] {
        absl::StatusOr<v1::Run> l = GetRun(*b, local.id()), r = GetRun(*b, remote.id());
        return l.ok() && r.ok() && l->status() == v1::RUN_STATUS_FAILED &&
               r->status() == v1::RUN_STATUS_FAILED;
      },
      absl::Seconds(kLeaseSeconds) + kMargin))
      << c->Log(1) << c->Log(2);
  EXPECT_LE(absl::Now() - killed, absl::Seconds(kLeaseSeconds) + kMargin);
  for (const v1::Run& run : {local, remote}) {
    // Read through C too: any replica answers from the store.
    absl::StatusOr<v1::Run> failed = GetRun(*c->Stub(2), run.id());
    ASSERT_TRUE(failed.ok()) << failed.status();
    EXPECT_TRUE(absl::StartsWith(failed->status_reason(),
                                 "replica replica-a stopped renewing its lease, which ended at"))
        << failed->status_reason();
  }
  // Exactly one of B and C did the cleanup.
  const bool by_b = absl::StrContains(c->Log(1), "\"event\":\"replica.takeover\"");
  const bool by_c = absl::StrContains(c->Log(2), "\"event\":\"replica.takeover\"");
  EXPECT_NE(by_b, by_c) << "B: " << by_b << ", C: " << by_c;

  // The waiting run is B's or C's now, and succeeds there.
  absl::StatusOr<v1::Run> moved = GetRun(*b, waiting.id());
  ASSERT_TRUE(moved.ok()) << moved.status();
  const int mover = c->IndexOf(moved->replica());
  ASSERT_TRUE(mover == 1 || mover == 2) << moved->replica();
  std::vector<v1::Event> events = FollowToEnd(*c->Stub(mover), waiting.id(), kAlpha);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED)
      << events.back().run_finished().reason();

  // A's container is gone from the fake, deleted once; its local sandbox is not theirs.
  EXPECT_TRUE(Eventually(
      "the fake to hold no container", [&] { return fake.State()["containers"].empty(); },
      kMargin));
  std::map<std::string, int> deletes;
  const nlohmann::json state = fake.State();
  for (const auto& r : state["requests"]) {
    const std::string path = r.value("path", "");
    if (r.value("method", "") == "DELETE") ++deletes[path];
  }
  for (const auto& [path, n] : deletes) EXPECT_EQ(n, 1) << path << " deleted " << n << " times";
  EXPECT_GE(c->QueryInt("SELECT count(*) FROM journal"), 1) << "A's local sandbox waits for A";

  // A comes back: its own sweep empties the journal, and it takes runs again.
  ASSERT_TRUE(c->Start(0).ok());
  EXPECT_TRUE(Eventually("the journal to be empty", [&] {
    return c->QueryInt("SELECT count(*) FROM journal") == 0;
  })) << c->Log(0);
  EXPECT_TRUE(absl::StrContains(c->Log(0), "replica.joined"));
  const v1::Run again = Start(*c->Stub(0), SampleRequest());
  EXPECT_EQ(again.replica(), "replica-a");
  events = FollowToEnd(*c->Stub(0), again.id(), kAlpha);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED);
}

// A run on A followed from B and C, from the start and from a middle seq, while it runs: each
// follower sees every event once, in order, the same as A's log, and its stream ends with
// run.finished.
TEST(ClusterTest, RunOnAFollowedFromBAndCFromZeroAndFromAMiddleSeq) {
  // The fallback poll out of the way: only the store's notification can wake them in time.
  std::unique_ptr<Cluster> c = MakeCluster(420800, {{"replica", {{"follow_poll_ms", 10000}}}});
  ASSERT_NE(c, nullptr);
  KeepOnFailure keep{c.get()};
  v1::RunAnalysisRequest req = SampleRequest();
  // Output over a second or two, so the followers are live, not replaying a finished log.
  req.mutable_sandbox()->add_setup_commands(
      "for i in 1 2 3 4 5 6 7 8; do echo $i; sleep 0.2; done");
  const v1::Run run = Start(*c->Stub(0), req);
  ASSERT_EQ(run.replica(), "replica-a");
  constexpr int64_t kMiddle = 3;
  struct Follower {
    int replica;
    int64_t after;
    std::vector<v1::Event> events;
    absl::Time ended;  // when its stream gave run.finished
  };
  // The first follows on A itself: the log as its owner wrote it, and when it ended there.
  std::vector<Follower> followers = {
      {0, 0, {}, {}}, {1, 0, {}, {}}, {2, 0, {}, {}}, {1, kMiddle, {}, {}}, {2, kMiddle, {}, {}}};
  std::vector<std::thread> threads;
  for (Follower& f : followers) {
    threads.emplace_back([&] {
      f.events = FollowToEnd(*c->Stub(f.replica), run.id(), kAlpha, f.after);
      f.ended = absl::Now();
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<v1::Event>& truth = followers[0].events;
  ASSERT_GT(truth.size(), static_cast<size_t>(kMiddle) + 5);
  EXPECT_EQ(truth.back().run_finished().status(), v1::RUN_STATUS_SUCCEEDED);
  for (const Follower& f : followers) {
    const std::string who = absl::StrCat(Cluster::Id(f.replica), " after ", f.after);
    ASSERT_EQ(f.events.size(), truth.size() - f.after) << who;
    for (size_t k = 0; k < f.events.size(); ++k) {
      EXPECT_EQ(f.events[k].seq(), static_cast<int64_t>(k) + f.after + 1) << who;
      EXPECT_EQ(f.events[k].type(), truth[k + f.after].type()) << who;
    }
    // Live: woken by A's appends (the notification), not by the poll 10 s later.
    EXPECT_LE(f.ended - followers[0].ended, absl::Seconds(1)) << who;
  }
}

// A cancel sent to C for a run on A ends it CANCELLED on A.
TEST(ClusterTest, CancelSentToCEndsTheRunOnACancelled) {
  std::unique_ptr<Cluster> c = MakeCluster(421200);
  ASSERT_NE(c, nullptr);
  KeepOnFailure keep{c.get()};
  v1::RunAnalysisRequest req = SampleRequest();
  req.mutable_sandbox()->add_setup_commands("sleep 300");
  const v1::Run run = Start(*c->Stub(0), req);
  ASSERT_TRUE(WaitForCommand(*c->Stub(0), run.id())) << c->Log(0);
  {
    auto ctx = Cluster::Context(kAlpha);
    v1::CancelRunRequest creq;
    creq.set_run_id(run.id());
    creq.set_reason("cancelled through C");
    v1::Run answer;
    grpc::Status st = c->Stub(2)->CancelRun(ctx.get(), creq, &answer);
    ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << c->Log(2);
  }
  std::vector<v1::Event> events = FollowToEnd(*c->Stub(0), run.id(), kAlpha);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().run_finished().status(), v1::RUN_STATUS_CANCELLED)
      << events.back().run_finished().reason();
  EXPECT_EQ(GetRun(*c->Stub(1), run.id())->status(), v1::RUN_STATUS_CANCELLED);
}

// A session on A used entirely through B: upload, exec, download; kept alive and closed
// through C. B and C forward to A, invisibly.
TEST(ClusterTest, ExecUploadAndDownloadThroughBOnASession) {
  std::unique_ptr<Cluster> c = MakeCluster(421600);
  ASSERT_NE(c, nullptr);
  KeepOnFailure keep{c.get()};
  v1::Session s;
  {
    auto ctx = Cluster::Context(kAlpha);
    v1::CreateSessionRequest req;
    ASSERT_TRUE(c->Stub(0)->CreateSession(ctx.get(), req, &s).ok()) << c->Log(0);
  }
  ASSERT_EQ(s.replica(), "replica-a");
  auto b = c->Stub(1);
  const std::string content = "hello from the test, through replica-b\n";
  {
    auto ctx = Cluster::Context(kAlpha);
    v1::FileInfo info;
    auto writer = b->UploadFile(ctx.get(), &info);
    v1::UploadFileRequest header;
    header.mutable_header()->set_session_id(s.id());
    header.mutable_header()->set_path("in.txt");
    ASSERT_TRUE(writer->Write(header));
    v1::UploadFileRequest chunk;
    chunk.set_data(content);
    ASSERT_TRUE(writer->Write(chunk));
    writer->WritesDone();
    grpc::Status st = writer->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message() << "\n" << c->Log(1);
  }
  std::string out;
  {
    auto ctx = Cluster::Context(kAlpha);
    v1::ExecRequest req;
    req.set_session_id(s.id());
    req.set_command("cat in.txt; tr a-z A-Z < in.txt > out.txt");
    auto reader = b->Exec(ctx.get(), req);
    v1::ExecResponse r;
    while (reader->Read(&r)) {
      if (r.has_output() && r.output().stream() == v1::CommandOutput::STREAM_STDOUT) {
        out += r.output().data();
      }
    }
    grpc::Status st = reader->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(out, content);
  std::string downloaded;
  {
    auto ctx = Cluster::Context(kAlpha);
    v1::DownloadFileRequest req;
    req.set_session_id(s.id());
    req.set_path("out.txt");
    auto reader = b->DownloadFile(ctx.get(), req);
    v1::FileChunk chunk;
    while (reader->Read(&chunk)) downloaded += chunk.data();
    grpc::Status st = reader->Finish();
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(downloaded, absl::AsciiStrToUpper(content));
  auto cc = c->Stub(2);
  {
    auto ctx = Cluster::Context(kAlpha);
    v1::KeepAliveRequest req;
    req.set_session_id(s.id());
    v1::Session kept;
    grpc::Status st = cc->KeepAlive(ctx.get(), req, &kept);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  {
    auto ctx = Cluster::Context(kAlpha);
    v1::CloseSessionRequest req;
    req.set_session_id(s.id());
    v1::Session closed;
    grpc::Status st = cc->CloseSession(ctx.get(), req, &closed);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_TRUE(Eventually("A to have closed the session", [&] {
    return c->QueryInt("SELECT count(*) FROM sessions WHERE status = 2") == 1;
  }));
  EXPECT_TRUE(Eventually("the journal to be empty",
                         [&] { return c->QueryInt("SELECT count(*) FROM journal") == 0; }));
}

}  // namespace
}  // namespace sandgate::testing
